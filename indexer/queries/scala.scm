; Scala tags: braced packages, objects (package objects and case objects included),
; classes, traits, enums, type aliases, functions (`def`, abstract declarations
; included; methods inside a class/object/trait), `val`s of an object or at top level as
; constants, imports, calls (`new` included) and extends / with clauses.
;
; - `package a.b` without braces is a namespace symbol (its fragment is the clause) that
;   qualifies everything after it (`@definition.namespace.rest`); clauses chain as in Scala
;   (`package a` then `package b` -> `a.b`), like braced `package a { ... }`.
; - An import edge names the imported entity: the last path segment (`import a.b.C` ->
;   `C`), each selector (`import a.{B, C => D}` -> `B`, `C`), or the package for a
;   wildcard (`import a.b._` -> `b`): the grammar has no node spanning the dotted path.

; --- packages and types -----------------------------------------------------------------------

(package_clause
  name: (package_identifier) @name
  body: (_)) @definition.namespace

(package_clause
  name: (package_identifier) @name
  !body) @definition.namespace.rest

(object_definition
  name: (identifier) @name) @definition.object

(package_object
  name: (identifier) @name) @definition.object

(class_definition
  name: (identifier) @name) @definition.class

(trait_definition
  name: (identifier) @name) @definition.trait

(enum_definition
  name: (identifier) @name) @definition.enum

(type_definition
  name: (type_identifier) @name) @definition.type

; --- functions ------------------------------------------------------------------------------

(function_definition
  name: (identifier) @name) @definition.function

(function_declaration
  name: (identifier) @name) @definition.function

; --- constants ------------------------------------------------------------------------------

(compilation_unit
  (val_definition
    pattern: (identifier) @name) @definition.constant)

(object_definition
  body: (template_body
    (val_definition
      pattern: (identifier) @name) @definition.constant))

; --- imports --------------------------------------------------------------------------------

; (No `path:` field in these patterns: the grammar puts it on every segment and the query
; engine matches only the first one.)
(import_declaration
  (identifier) @name .) @reference.import

(import_declaration
  (identifier) @name . (namespace_wildcard)) @reference.import

(import_declaration
  (identifier) @name . (namespace_selectors (namespace_wildcard))) @reference.import

(import_declaration
  (namespace_selectors
    [
      (identifier) @name
      (arrow_renamed_identifier name: (identifier) @name)
    ])) @reference.import

; --- calls ----------------------------------------------------------------------------------

(call_expression
  function: [
    (identifier) @name
    (field_expression field: (identifier) @name)
    (generic_function function: (identifier) @name)
    (generic_function function: (field_expression field: (identifier) @name))
  ]) @reference.call

(instance_expression
  [
    (type_identifier) @name
    (generic_type type: (type_identifier) @name)
    (stable_type_identifier (type_identifier) @name .)
  ]) @reference.call

; --- inheritance ----------------------------------------------------------------------------

; No `type:` field: only the first of several `type:` children would match.
(extends_clause
  [
    (type_identifier) @name
    (generic_type type: (type_identifier) @name)
    (stable_type_identifier (type_identifier) @name .)
    (generic_type type: (stable_type_identifier (type_identifier) @name .))
  ] @reference.inherit)
