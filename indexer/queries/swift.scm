; Swift tags: classes (actors as class), structs, enums, protocols, extensions (named by
; the extended type), type aliases, functions (methods inside a type, extension or
; protocol; protocol requirements included), initializers (named `init`), top-level `let`
; as constants, imports, calls and inheritance clauses (superclass and conformances).
;
; - An extension is kind `extension` with the extended type's name, so its members are
;   `Type.member` like members of the type itself.
; - Properties (stored or computed), subscripts and deinitializers are not symbols.

; --- types ----------------------------------------------------------------------------------

(class_declaration
  declaration_kind: ["class" "actor"]
  name: (type_identifier) @name) @definition.class

(class_declaration
  declaration_kind: "struct"
  name: (type_identifier) @name) @definition.struct

(class_declaration
  declaration_kind: "enum"
  name: (type_identifier) @name) @definition.enum

(class_declaration
  declaration_kind: "extension"
  name: (user_type (type_identifier) @name .)) @definition.extension

(protocol_declaration
  name: (type_identifier) @name) @definition.protocol

(typealias_declaration
  name: (type_identifier) @name) @definition.type

; --- functions ------------------------------------------------------------------------------

(function_declaration
  name: (simple_identifier) @name) @definition.function

(protocol_function_declaration
  name: (simple_identifier) @name) @definition.function

(init_declaration
  "init" @name) @definition.function

; --- constants ------------------------------------------------------------------------------

(source_file
  (property_declaration
    (value_binding_pattern) @_let
    name: (pattern bound_identifier: (simple_identifier) @name)
    (#eq? @_let "let")) @definition.constant)

; --- imports --------------------------------------------------------------------------------

(import_declaration
  (identifier) @name) @reference.import

; --- calls ----------------------------------------------------------------------------------

(call_expression
  .
  [
    (simple_identifier) @name
    (navigation_expression suffix: (navigation_suffix suffix: (simple_identifier) @name))
  ]) @reference.call

; --- inheritance ----------------------------------------------------------------------------

(inheritance_specifier
  inherits_from: (user_type (type_identifier) @name .)) @reference.inherit
