; C++ tags: namespaces, classes, structs (unions as struct), enums, typedefs and `using`
; aliases, function definitions (methods when defined inside a class), pure virtual
; method declarations, out-of-line member definitions (`Foo::bar` -> `Foo.bar`),
; function-like macros (as functions), object-like `#define` macros and namespace-level
; `const`/`constexpr` variables as constants, `#include`s and `using`
; declarations/directives, calls (`new` included) and base classes.
;
; - Out-of-line definitions are qualified by the
;   written scope, nested under the enclosing namespace: `double render::Circle::area()`
;   and `namespace render { double Circle::area() }` are both `render.Circle.area`. They
;   are kind `method` even when the scope is a namespace (`void ns::f() {}`), which syntax
;   cannot tell apart.
; - A typedef whose type is a struct/union/enum body is ONE symbol named by the typedef
;   name (as in C).
; - Declarations without a body are not symbols, except pure virtual methods (`= 0`).
;
; Order matters where two patterns can match the same node: the extractor keeps the first
; match per node, and tree-sitter reports matches that end on the same node in pattern
; order, so the typedef-of-a-body patterns precede the generic typedef patterns.

; --- namespaces ---------------------------------------------------------------------------

(namespace_definition
  name: [(namespace_identifier) (nested_namespace_specifier)] @name) @definition.namespace

; --- typedefs and aliases -----------------------------------------------------------------

(type_definition
  type: (struct_specifier body: (_))
  declarator: (type_identifier) @name) @definition.struct

(type_definition
  type: (union_specifier body: (_))
  declarator: (type_identifier) @name) @definition.struct

(type_definition
  type: (class_specifier body: (_))
  declarator: (type_identifier) @name) @definition.class

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

(alias_declaration
  name: (type_identifier) @name) @definition.type

; --- classes / structs / unions / enums outside typedefs ---------------------------------
; Listed per parent so that a body inside a typedef is not captured a second time.

(translation_unit
  [
    (class_specifier name: (type_identifier) @name body: (_)) @definition.class
    (struct_specifier name: (type_identifier) @name body: (_)) @definition.struct
    (union_specifier name: (type_identifier) @name body: (_)) @definition.struct
    (enum_specifier name: (type_identifier) @name body: (_)) @definition.enum
  ])

(declaration_list
  [
    (class_specifier name: (type_identifier) @name body: (_)) @definition.class
    (struct_specifier name: (type_identifier) @name body: (_)) @definition.struct
    (union_specifier name: (type_identifier) @name body: (_)) @definition.struct
    (enum_specifier name: (type_identifier) @name body: (_)) @definition.enum
  ])

(template_declaration
  [
    (class_specifier name: (type_identifier) @name body: (_)) @definition.class
    (struct_specifier name: (type_identifier) @name body: (_)) @definition.struct
    (union_specifier name: (type_identifier) @name body: (_)) @definition.struct
  ])

(field_declaration
  type: [
    (class_specifier name: (type_identifier) @name body: (_)) @definition.class
    (struct_specifier name: (type_identifier) @name body: (_)) @definition.struct
    (union_specifier name: (type_identifier) @name body: (_)) @definition.struct
    (enum_specifier name: (type_identifier) @name body: (_)) @definition.enum
  ])

(declaration
  type: [
    (class_specifier name: (type_identifier) @name body: (_)) @definition.class
    (struct_specifier name: (type_identifier) @name body: (_)) @definition.struct
    (union_specifier name: (type_identifier) @name body: (_)) @definition.struct
    (enum_specifier name: (type_identifier) @name body: (_)) @definition.enum
  ])

(compound_statement
  [
    (class_specifier name: (type_identifier) @name body: (_)) @definition.class
    (struct_specifier name: (type_identifier) @name body: (_)) @definition.struct
    (union_specifier name: (type_identifier) @name body: (_)) @definition.struct
    (enum_specifier name: (type_identifier) @name body: (_)) @definition.enum
  ])

(preproc_ifdef
  [
    (class_specifier name: (type_identifier) @name body: (_)) @definition.class
    (struct_specifier name: (type_identifier) @name body: (_)) @definition.struct
    (union_specifier name: (type_identifier) @name body: (_)) @definition.struct
    (enum_specifier name: (type_identifier) @name body: (_)) @definition.enum
  ])

(preproc_if
  [
    (class_specifier name: (type_identifier) @name body: (_)) @definition.class
    (struct_specifier name: (type_identifier) @name body: (_)) @definition.struct
    (union_specifier name: (type_identifier) @name body: (_)) @definition.struct
    (enum_specifier name: (type_identifier) @name body: (_)) @definition.enum
  ])

; --- functions and in-class methods ---------------------------------------------------------

(function_definition
  declarator: [
    (function_declarator
      declarator: [(identifier) (field_identifier) (destructor_name) (operator_name)] @name)
    (pointer_declarator
      declarator: (function_declarator
        declarator: [(identifier) (field_identifier) (operator_name)] @name))
    (reference_declarator
      (function_declarator
        declarator: [(identifier) (field_identifier) (operator_name)] @name))
  ]) @definition.function

; Pure virtual declarations (`virtual R f() = 0;`) are the only definition of the method.
(field_declaration
  declarator: [
    (function_declarator declarator: (field_identifier) @name)
    (pointer_declarator declarator: (function_declarator declarator: (field_identifier) @name))
    (reference_declarator (function_declarator declarator: (field_identifier) @name))
  ]
  default_value: (number_literal) @_zero
  (#eq? @_zero "0")) @definition.function

; --- out-of-line member definitions: `Foo::bar`, `ns::Foo::bar`, `Foo<T>::bar` ----------------
;
; @qualifier is the whole written name (`ns::Foo<T>::bar`); the extractor keeps the scope
; before @name (`ns.Foo`) and nests it under the enclosing namespace (qualifier_nests).

(function_definition
  declarator: [
    (function_declarator
      declarator: (qualified_identifier
        scope: (_)
        name: [(identifier) (destructor_name) (operator_name)] @name) @qualifier)
    (pointer_declarator
      declarator: (function_declarator
        declarator: (qualified_identifier
          scope: (_)
          name: [(identifier) (operator_name)] @name) @qualifier))
    (reference_declarator
      (function_declarator
        declarator: (qualified_identifier
          scope: (_)
          name: [(identifier) (operator_name)] @name) @qualifier))
  ]) @definition.method

(function_definition
  declarator: [
    (function_declarator
      declarator: (qualified_identifier
        name: (qualified_identifier
          scope: (_)
          name: [(identifier) (destructor_name) (operator_name)] @name)) @qualifier)
    (pointer_declarator
      declarator: (function_declarator
        declarator: (qualified_identifier
          name: (qualified_identifier
            scope: (_)
            name: [(identifier) (operator_name)] @name)) @qualifier))
    (reference_declarator
      (function_declarator
        declarator: (qualified_identifier
          name: (qualified_identifier
            scope: (_)
            name: [(identifier) (operator_name)] @name)) @qualifier))
  ]) @definition.method

(function_definition
  declarator: [
    (function_declarator
      declarator: (qualified_identifier
        name: (qualified_identifier
          name: (qualified_identifier
            scope: (_)
            name: [(identifier) (destructor_name) (operator_name)] @name))) @qualifier)
    (pointer_declarator
      declarator: (function_declarator
        declarator: (qualified_identifier
          name: (qualified_identifier
            name: (qualified_identifier
              scope: (_)
              name: [(identifier) (operator_name)] @name))) @qualifier))
    (reference_declarator
      (function_declarator
        declarator: (qualified_identifier
          name: (qualified_identifier
            name: (qualified_identifier
              scope: (_)
              name: [(identifier) (operator_name)] @name))) @qualifier))
  ]) @definition.method

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
    (#any-of? @_const "const" "constexpr")) @definition.constant)

(declaration_list
  (declaration
    (type_qualifier) @_const
    declarator: (init_declarator declarator: (identifier) @name)
    (#any-of? @_const "const" "constexpr")) @definition.constant)

; --- imports: #include and using ------------------------------------------------------------

(preproc_include
  path: [
    (string_literal (string_content) @name)
    (system_lib_string) @name
  ]) @reference.import

(using_declaration
  [(identifier) (qualified_identifier)] @name) @reference.import

; --- calls ----------------------------------------------------------------------------------

(call_expression
  function: [
    (identifier) @name
    (field_expression field: (field_identifier) @name)
    (field_expression field: (dependent_name (template_method name: (field_identifier) @name)))
    (field_expression field: (template_method name: (field_identifier) @name))
    (qualified_identifier name: (identifier) @name)
    (qualified_identifier name: (template_function name: (identifier) @name))
    (qualified_identifier name: (qualified_identifier name: (identifier) @name))
    (template_function name: (identifier) @name)
  ]) @reference.call

(new_expression
  type: [
    (type_identifier) @name
    (template_type name: (type_identifier) @name)
    (qualified_identifier name: (type_identifier) @name)
  ]) @reference.call

; --- inheritance ----------------------------------------------------------------------------

(base_class_clause
  [
    (type_identifier) @name
    (template_type name: (type_identifier) @name)
    (qualified_identifier name: (type_identifier) @name)
    (qualified_identifier name: (template_type name: (type_identifier) @name))
  ] @reference.inherit)
