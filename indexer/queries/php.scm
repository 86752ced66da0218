; PHP tags: braced namespaces, classes, interfaces, traits, enums, methods, functions,
; `const` elements (file and class level) as constants, `use` imports and
; `require`/`include`, calls (`new` included), and extends / implements / trait `use` as
; inheritance.
;
; - The statement form `namespace App\Models;` is a namespace symbol (its fragment is the
;   statement) that qualifies the declarations after it up to the next namespace statement
;   (`@definition.namespace.rest`), like the braced form `namespace App\Models { ... }`;
;   names keep their backslashes.

; --- namespaces and types -------------------------------------------------------------------

(namespace_definition
  name: (namespace_name) @name
  body: (compound_statement)) @definition.namespace

(namespace_definition
  name: (namespace_name) @name
  !body) @definition.namespace.rest

(class_declaration
  name: (name) @name) @definition.class

(interface_declaration
  name: (name) @name) @definition.interface

(trait_declaration
  name: (name) @name) @definition.trait

(enum_declaration
  name: (name) @name) @definition.enum

; --- functions and methods ------------------------------------------------------------------

(function_definition
  name: (name) @name) @definition.function

(method_declaration
  name: (name) @name) @definition.function

; --- constants ------------------------------------------------------------------------------

(const_declaration
  (const_element
    (name) @name) @definition.constant)

; --- imports --------------------------------------------------------------------------------

(namespace_use_declaration
  (namespace_use_clause
    .
    [(qualified_name) (name)] @name)) @reference.import

(namespace_use_declaration
  (namespace_name) @name
  body: (namespace_use_group)) @reference.import

(require_expression (string (string_content) @name)) @reference.import
(require_once_expression (string (string_content) @name)) @reference.import
(include_expression (string (string_content) @name)) @reference.import
(include_once_expression (string (string_content) @name)) @reference.import

; --- calls ----------------------------------------------------------------------------------

(function_call_expression
  function: [
    (name) @name
    (qualified_name (name) @name .)
  ]) @reference.call

(member_call_expression
  name: (name) @name) @reference.call

(nullsafe_member_call_expression
  name: (name) @name) @reference.call

(scoped_call_expression
  name: (name) @name) @reference.call

(object_creation_expression
  [
    (name) @name
    (qualified_name (name) @name .)
  ]
  (#not-any-of? @name "static" "self" "parent")) @reference.call

; --- inheritance ----------------------------------------------------------------------------

(base_clause
  [
    (name) @name
    (qualified_name (name) @name .)
  ] @reference.inherit)

(class_interface_clause
  [
    (name) @name
    (qualified_name (name) @name .)
  ] @reference.inherit)

(use_declaration
  [
    (name) @name
    (qualified_name (name) @name .)
  ] @reference.inherit)
