; C tags: structs (unions as struct), enums, typedefs, function definitions, function-like
; macros (as functions), object-like `#define` macros and file-level `const` variables as
; constants, `#include`s and calls.
;
; - A typedef whose type is a struct/union/enum body (`typedef struct node {...} node_t;`)
;   is ONE symbol named by the typedef name (`struct node_t`), so the tag name is not
;   nested under the typedef. Other typedefs are kind `type`.
; - Function prototypes are not symbols (only definitions are).
;
; Order matters where two patterns can match the same node: the extractor keeps the first
; match per node, and tree-sitter reports matches that end on the same node in pattern
; order, so the typedef-of-a-body patterns precede the generic typedef patterns.

; --- typedefs -----------------------------------------------------------------------------

(type_definition
  type: [(struct_specifier body: (_)) (union_specifier body: (_))]
  declarator: (type_identifier) @name) @definition.struct

(type_definition
  type: (enum_specifier body: (_))
  declarator: (type_identifier) @name) @definition.enum

(type_definition
  declarator: [
    (type_identifier) @name
    (pointer_declarator declarator: (type_identifier) @name)
    (array_declarator declarator: (type_identifier) @name)
    (function_declarator declarator: (type_identifier) @name)
    (function_declarator
      declarator: (parenthesized_declarator
        (pointer_declarator declarator: (type_identifier) @name)))
  ]) @definition.type

; --- structs / unions / enums outside typedefs ---------------------------------------------
; Listed per parent so that a body inside a typedef is not captured a second time.

(translation_unit
  [
    (struct_specifier name: (type_identifier) @name body: (_)) @definition.struct
    (union_specifier name: (type_identifier) @name body: (_)) @definition.struct
    (enum_specifier name: (type_identifier) @name body: (_)) @definition.enum
  ])

(preproc_ifdef
  [
    (struct_specifier name: (type_identifier) @name body: (_)) @definition.struct
    (union_specifier name: (type_identifier) @name body: (_)) @definition.struct
    (enum_specifier name: (type_identifier) @name body: (_)) @definition.enum
  ])

(preproc_if
  [
    (struct_specifier name: (type_identifier) @name body: (_)) @definition.struct
    (union_specifier name: (type_identifier) @name body: (_)) @definition.struct
    (enum_specifier name: (type_identifier) @name body: (_)) @definition.enum
  ])

(preproc_else
  [
    (struct_specifier name: (type_identifier) @name body: (_)) @definition.struct
    (union_specifier name: (type_identifier) @name body: (_)) @definition.struct
    (enum_specifier name: (type_identifier) @name body: (_)) @definition.enum
  ])

(preproc_elif
  [
    (struct_specifier name: (type_identifier) @name body: (_)) @definition.struct
    (union_specifier name: (type_identifier) @name body: (_)) @definition.struct
    (enum_specifier name: (type_identifier) @name body: (_)) @definition.enum
  ])

(declaration
  type: [
    (struct_specifier name: (type_identifier) @name body: (_)) @definition.struct
    (union_specifier name: (type_identifier) @name body: (_)) @definition.struct
    (enum_specifier name: (type_identifier) @name body: (_)) @definition.enum
  ])

(field_declaration
  type: [
    (struct_specifier name: (type_identifier) @name body: (_)) @definition.struct
    (union_specifier name: (type_identifier) @name body: (_)) @definition.struct
    (enum_specifier name: (type_identifier) @name body: (_)) @definition.enum
  ])

(compound_statement
  [
    (struct_specifier name: (type_identifier) @name body: (_)) @definition.struct
    (union_specifier name: (type_identifier) @name body: (_)) @definition.struct
    (enum_specifier name: (type_identifier) @name body: (_)) @definition.enum
  ])

; --- function definitions -------------------------------------------------------------------

(function_definition
  declarator: [
    (function_declarator declarator: (identifier) @name)
    (pointer_declarator declarator: (function_declarator declarator: (identifier) @name))
    (pointer_declarator
      declarator: (pointer_declarator
        declarator: (function_declarator declarator: (identifier) @name)))
  ]) @definition.function

; --- constants ------------------------------------------------------------------------------

(preproc_def
  name: (identifier) @name
  value: (_)) @definition.constant

; Function-like macros are cited and called like functions.
(preproc_function_def
  name: (identifier) @name) @definition.function

(translation_unit
  (declaration
    (type_qualifier) @_const
    declarator: (init_declarator declarator: (identifier) @name)
    (#eq? @_const "const")) @definition.constant)

(preproc_ifdef
  (declaration
    (type_qualifier) @_const
    declarator: (init_declarator declarator: (identifier) @name)
    (#eq? @_const "const")) @definition.constant)

; --- includes -------------------------------------------------------------------------------

(preproc_include
  path: [
    (string_literal (string_content) @name)
    (system_lib_string) @name
  ]) @reference.import

; --- calls ----------------------------------------------------------------------------------

(call_expression
  function: [
    (identifier) @name
    (field_expression field: (field_identifier) @name)
  ]) @reference.call
