; C# tags: block namespaces, classes, structs, interfaces, enums, records, delegates (as
; `type`), methods, constructors and local functions, `const` fields as constants,
; `using` directives, calls (`new` included) and base lists.
;
; - A file-scoped `namespace X;` is a namespace symbol (its fragment is the statement) that
;   qualifies every declaration after it (`@definition.namespace.rest`), like a block one.
; - Properties, events, indexers, operators and destructors are not symbols.

; --- namespaces and types -----------------------------------------------------------------

(namespace_declaration
  name: [(identifier) (qualified_name)] @name) @definition.namespace

(file_scoped_namespace_declaration
  name: [(identifier) (qualified_name)] @name) @definition.namespace.rest

(class_declaration
  name: (identifier) @name) @definition.class

(struct_declaration
  name: (identifier) @name) @definition.struct

(interface_declaration
  name: (identifier) @name) @definition.interface

(enum_declaration
  name: (identifier) @name) @definition.enum

(record_declaration
  name: (identifier) @name) @definition.record

(delegate_declaration
  name: (identifier) @name) @definition.type

; --- methods --------------------------------------------------------------------------------

(method_declaration
  name: (identifier) @name) @definition.function

(constructor_declaration
  name: (identifier) @name) @definition.function

(local_function_statement
  name: (identifier) @name) @definition.function

; --- constants ------------------------------------------------------------------------------

(field_declaration
  (modifier) @_const
  (variable_declaration
    (variable_declarator
      name: (identifier) @name) @definition.constant)
  (#eq? @_const "const"))

; --- imports --------------------------------------------------------------------------------
; The imported namespace/type is the last named child (after an alias name, if any).

(using_directive
  [(identifier) (qualified_name) (generic_name)] @name .) @reference.import

; --- calls ----------------------------------------------------------------------------------

(invocation_expression
  function: [
    (identifier) @name
    (generic_name (identifier) @name)
    (member_access_expression name: (identifier) @name)
    (member_access_expression name: (generic_name (identifier) @name))
  ]) @reference.call

(object_creation_expression
  type: [
    (identifier) @name
    (generic_name (identifier) @name)
    (qualified_name name: (identifier) @name)
    (qualified_name name: (generic_name (identifier) @name))
  ]) @reference.call

; --- inheritance ----------------------------------------------------------------------------

(base_list
  [
    (identifier) @name
    (generic_name (identifier) @name)
    (qualified_name name: (identifier) @name)
    (qualified_name name: (generic_name (identifier) @name))
  ] @reference.inherit)
