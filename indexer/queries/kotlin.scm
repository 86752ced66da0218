; Kotlin tags (grammar: the tree-sitter-kotlin wheel, tree-sitter-grammars 1.x, where names
; are `identifier` fields): classes (data/sealed/annotation/inner included), interfaces,
; enum classes, objects and named companion objects, type aliases, functions (methods
; inside a class/object/interface), `const val` properties as constants, imports, calls and
; supertypes (delegation specifiers).
;
; - A companion object without a name is not a symbol: its members are qualified by the
;   enclosing class (`Foo.create`); a named one qualifies them (`Foo.Factory.create`).
; - Extension functions are qualified by their receiver type via @qualifier
;   (`fun String.slug()` -> `String.slug`, kind `function`).
;
; Order matters where two patterns can match the same node: the extractor keeps the first
; match per node, and tree-sitter reports matches that end on the same node in pattern
; order, so the `enum class` pattern precedes the generic `class` pattern and the
; extension-function pattern precedes the plain function pattern.

; --- types ----------------------------------------------------------------------------------

(class_declaration
  (modifiers (class_modifier "enum"))
  name: (identifier) @name) @definition.enum

(class_declaration
  "interface"
  name: (identifier) @name) @definition.interface

(class_declaration
  "class"
  name: (identifier) @name) @definition.class

(object_declaration
  name: (identifier) @name) @definition.object

(companion_object
  name: (identifier) @name) @definition.object

(type_alias
  type: (identifier) @name) @definition.type

; --- functions ------------------------------------------------------------------------------

; Extension functions are qualified by their receiver type (`fun Note.preview()` ->
; `Note.preview`, kind `function`), so same-named extensions of different types differ.
(function_declaration
  [
    (user_type (identifier) @qualifier .)
    (user_type (identifier) @qualifier . (type_arguments))
    (nullable_type (user_type (identifier) @qualifier .))
    (nullable_type (user_type (identifier) @qualifier . (type_arguments)))
  ]
  .
  name: (identifier) @name) @definition.function

(function_declaration
  name: (identifier) @name) @definition.function

; --- constants ------------------------------------------------------------------------------

(property_declaration
  (modifiers (property_modifier) @_const)
  (variable_declaration (identifier) @name)
  (#eq? @_const "const")) @definition.constant

; --- imports --------------------------------------------------------------------------------

(import
  (qualified_identifier) @name) @reference.import

; --- calls ----------------------------------------------------------------------------------

(call_expression
  .
  [
    (identifier) @name
    (navigation_expression (identifier) @name .)
  ]) @reference.call

; --- inheritance ----------------------------------------------------------------------------

(delegation_specifier
  [
    (user_type (identifier) @name .)
    (user_type (identifier) @name . (type_arguments))
    (constructor_invocation (user_type (identifier) @name .))
    (constructor_invocation (user_type (identifier) @name . (type_arguments)))
    (explicit_delegation (user_type (identifier) @name .))
    (explicit_delegation (user_type (identifier) @name . (type_arguments)))
  ]) @reference.inherit
