; Go tags: struct / interface / other named types (aliases included), functions, methods
; qualified by their receiver type (`func (s *Store) Get()` -> `Store.Get`), interface
; method specs, package-level constants, imports, calls and embedding (struct and
; interface embedding as `inherits`).
;
; Order matters where two patterns can match the same node: the extractor keeps the first
; match per node, and tree-sitter reports matches that end on the same node in pattern
; order, so the struct / interface patterns precede the generic type pattern.

; --- types ------------------------------------------------------------------------------

(type_spec
  name: (type_identifier) @name
  type: (struct_type)) @definition.struct

(type_spec
  name: (type_identifier) @name
  type: (interface_type)) @definition.interface

(type_spec
  name: (type_identifier) @name
  type: (_)) @definition.type

(type_alias
  name: (type_identifier) @name) @definition.type

(interface_type
  (method_elem
    name: (field_identifier) @name) @definition.function)

; --- functions and methods --------------------------------------------------------------

(function_declaration
  name: (identifier) @name) @definition.function

(method_declaration
  receiver: (parameter_list
    (parameter_declaration
      type: [
        (type_identifier) @qualifier
        (pointer_type (type_identifier) @qualifier)
        (generic_type type: (type_identifier) @qualifier)
        (pointer_type (generic_type type: (type_identifier) @qualifier))
      ]))
  name: (field_identifier) @name) @definition.method

; --- constants --------------------------------------------------------------------------

(source_file
  (const_declaration
    (const_spec
      name: (identifier) @name) @definition.constant))

; --- imports ----------------------------------------------------------------------------

(import_spec
  path: (interpreted_string_literal
    (interpreted_string_literal_content) @name)) @reference.import

; --- calls ------------------------------------------------------------------------------

(call_expression
  function: [
    (identifier) @name
    (selector_expression field: (field_identifier) @name)
    (generic_type type: (type_identifier) @name)
    (index_expression operand: (identifier) @name)
  ]) @reference.call

; --- embedding --------------------------------------------------------------------------

(field_declaration
  !name
  type: [
    (type_identifier) @name
    (pointer_type (type_identifier) @name)
    (qualified_type name: (type_identifier) @name)
    (pointer_type (qualified_type name: (type_identifier) @name))
  ]) @reference.inherit

; A lone type in an interface is an embedded interface; unions (`int | string`) are type
; constraints and are skipped by the anchors.
(interface_type
  (type_elem
    .
    [
      (type_identifier) @name
      (qualified_type name: (type_identifier) @name)
    ]
    .) @reference.inherit)
