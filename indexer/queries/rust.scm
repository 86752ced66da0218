; Rust tags: inline modules, structs (unions as struct), enums, traits, type aliases and
; associated types, functions (trait method signatures and `extern` declarations
; included), `const` / `static` items, `impl` blocks as naming scopes (`impl Foo` and
; `impl Trait for Foo` both qualify their functions by `Foo`), imports (`use`,
; `extern crate`, out-of-line `mod foo;`), calls (macro invocations included) and
; inheritance (supertrait bounds, `impl Trait for Type`).

; --- modules and types ------------------------------------------------------------------

(mod_item
  name: (identifier) @name
  body: (declaration_list)) @definition.module

(struct_item
  name: (type_identifier) @name) @definition.struct

(union_item
  name: (type_identifier) @name) @definition.struct

(enum_item
  name: (type_identifier) @name) @definition.enum

(trait_item
  name: (type_identifier) @name) @definition.trait

(type_item
  name: (type_identifier) @name) @definition.type

(associated_type
  name: (type_identifier) @name) @definition.type

; --- impl blocks: a naming scope, qualified by the implementing type --------------------

(impl_item
  type: [
    (type_identifier) @name
    (generic_type type: (type_identifier) @name)
    (generic_type type: (scoped_type_identifier name: (type_identifier) @name))
    (scoped_type_identifier name: (type_identifier) @name)
    (reference_type type: (type_identifier) @name)
    (reference_type type: (generic_type type: (type_identifier) @name))
  ]) @scope

; --- functions ----------------------------------------------------------------------------

(function_item
  name: (identifier) @name) @definition.function

(function_signature_item
  name: (identifier) @name) @definition.function

; --- constants ------------------------------------------------------------------------------

(const_item
  name: (identifier) @name) @definition.constant

(static_item
  name: (identifier) @name) @definition.constant

; --- imports --------------------------------------------------------------------------------

(use_declaration
  argument: [(scoped_identifier) (identifier)] @name) @reference.import

(use_declaration
  argument: (scoped_use_list path: (_) @name)) @reference.import

(use_declaration
  argument: (use_as_clause path: (_) @name)) @reference.import

(use_declaration
  argument: (use_wildcard [(scoped_identifier) (identifier) (crate) (super) (self)] @name)) @reference.import

(extern_crate_declaration
  name: (identifier) @name) @reference.import

(mod_item
  name: (identifier) @name
  !body) @reference.import

; --- calls ----------------------------------------------------------------------------------

(call_expression
  function: [
    (identifier) @name
    (scoped_identifier name: (identifier) @name)
    (field_expression field: (field_identifier) @name)
    (generic_function function: (identifier) @name)
    (generic_function function: (scoped_identifier name: (identifier) @name))
    (generic_function function: (field_expression field: (field_identifier) @name))
  ]) @reference.call

(macro_invocation
  macro: [
    (identifier) @name
    (scoped_identifier name: (identifier) @name)
  ]) @reference.call

; --- inheritance ----------------------------------------------------------------------------

(trait_item
  bounds: (trait_bounds
    [
      (type_identifier) @name
      (scoped_type_identifier name: (type_identifier) @name)
      (generic_type type: (type_identifier) @name)
    ] @reference.inherit))

(impl_item
  trait: [
    (type_identifier) @name
    (scoped_type_identifier name: (type_identifier) @name)
    (generic_type type: (type_identifier) @name)
    (generic_type type: (scoped_type_identifier name: (type_identifier) @name))
  ] @reference.inherit)
