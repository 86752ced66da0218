; TypeScript tags: namespaces/modules, classes, interfaces, enums, type aliases, functions
; (overload signatures included), methods (class members, overload and abstract
; signatures, interface method signatures), module-level `const` declarators, imports,
; calls (`new` included) and heritage clauses.
;
; Order matters where two patterns can match the same node: the extractor keeps the first
; match per node, and tree-sitter reports matches that end on the same node in pattern
; order, so the function-valued `const` patterns precede the generic constant ones.

; --- namespaces / modules -------------------------------------------------------------

(internal_module
  name: [(identifier) (nested_identifier)] @name) @definition.namespace

(module
  name: [
    (identifier) @name
    (nested_identifier) @name
    (string (string_fragment) @name)
  ]) @definition.namespace

; --- types ----------------------------------------------------------------------------

(class_declaration
  name: (type_identifier) @name) @definition.class

(abstract_class_declaration
  name: (type_identifier) @name) @definition.class

(interface_declaration
  name: (type_identifier) @name) @definition.interface

(enum_declaration
  name: (identifier) @name) @definition.enum

(type_alias_declaration
  name: (type_identifier) @name) @definition.type

; --- functions and methods ------------------------------------------------------------
; Overload signatures and the implementation share kind `function` (a method inside a
; class), so they share a qualified name and get ordinals 1..n.

(function_declaration
  name: (identifier) @name) @definition.function

(generator_function_declaration
  name: (identifier) @name) @definition.function

(function_signature
  name: (identifier) @name) @definition.function

(class_body
  (method_definition
    name: [(property_identifier) (private_property_identifier)] @name) @definition.function)

(class_body
  (method_signature
    name: [(property_identifier) (private_property_identifier)] @name) @definition.function)

(class_body
  (abstract_method_signature
    name: [(property_identifier) (private_property_identifier)] @name) @definition.function)

(class_body
  (public_field_definition
    name: [(property_identifier) (private_property_identifier)] @name
    value: [(arrow_function) (function_expression)]) @definition.function)

; A class expression assigned to a (static) field is a nested class.
(class_body
  (public_field_definition
    name: [(property_identifier) (private_property_identifier)] @name
    value: (class)) @definition.class)

(interface_body
  (method_signature
    name: (property_identifier) @name) @definition.function)

; --- module-level const ----------------------------------------------------------------
; `const f = () => ...` / `const f = function ...` is a function, `const C = class ...` a
; class; any other initialised `const` at module level (file, namespace body) is a
; constant, except a CommonJS `require(...)` binding (an import, not a symbol).
; `let`/`var` are not symbols.

(program
  (lexical_declaration
    kind: "const"
    (variable_declarator
      name: (identifier) @name
      value: [(arrow_function) (function_expression) (generator_function)]) @definition.function))

(export_statement
  declaration: (lexical_declaration
    kind: "const"
    (variable_declarator
      name: (identifier) @name
      value: [(arrow_function) (function_expression) (generator_function)]) @definition.function))

(internal_module
  body: (statement_block
    (lexical_declaration
      kind: "const"
      (variable_declarator
        name: (identifier) @name
        value: [(arrow_function) (function_expression) (generator_function)]) @definition.function)))

(program
  (lexical_declaration
    kind: "const"
    (variable_declarator
      name: (identifier) @name
      value: (class)) @definition.class))

(export_statement
  declaration: (lexical_declaration
    kind: "const"
    (variable_declarator
      name: (identifier) @name
      value: (class)) @definition.class))

(program
  (lexical_declaration
    kind: "const"
    (variable_declarator
      name: (identifier) @name
      value: (_) @_value) @definition.constant
    (#not-match? @_value "^require[ ]*[(]")))

(export_statement
  declaration: (lexical_declaration
    kind: "const"
    (variable_declarator
      name: (identifier) @name
      value: (_) @_value) @definition.constant
    (#not-match? @_value "^require[ ]*[(]")))

(internal_module
  body: (statement_block
    (lexical_declaration
      kind: "const"
      (variable_declarator
        name: (identifier) @name
        value: (_) @_value) @definition.constant
    (#not-match? @_value "^require[ ]*[(]"))))

; --- imports ----------------------------------------------------------------------------

(import_statement
  source: (string (string_fragment) @name)) @reference.import

(import_require_clause
  source: (string (string_fragment) @name)) @reference.import

(export_statement
  source: (string (string_fragment) @name)) @reference.import

(call_expression
  function: (import)
  arguments: (arguments . (string (string_fragment) @name))) @reference.import

(call_expression
  function: (identifier) @_require
  arguments: (arguments . (string (string_fragment) @name))
  (#eq? @_require "require")) @reference.import

; --- calls ------------------------------------------------------------------------------

(call_expression
  function: [
    (identifier) @name
    (member_expression property: (property_identifier) @name)
  ]) @reference.call

(new_expression
  constructor: [
    (identifier) @name
    (member_expression property: (property_identifier) @name)
  ]) @reference.call

; --- inheritance ------------------------------------------------------------------------

(extends_clause
  value: [
    (identifier) @name
    (member_expression property: (property_identifier) @name)
  ]) @reference.inherit

(implements_clause
  [
    (type_identifier) @name
    (generic_type name: (type_identifier) @name)
    (generic_type name: (nested_type_identifier name: (type_identifier) @name))
    (nested_type_identifier name: (type_identifier) @name)
  ] @reference.inherit)

(extends_type_clause
  type: [
    (type_identifier) @name
    (generic_type name: (type_identifier) @name)
    (generic_type name: (nested_type_identifier name: (type_identifier) @name))
    (nested_type_identifier name: (type_identifier) @name)
  ] @reference.inherit)
