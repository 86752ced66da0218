; Java tags: classes, interfaces (annotation types included), enums, records, methods and
; constructors (named after their class, e.g. `Foo.Foo`), `static final` fields as
; constants, imports, calls (`new` included) and extends / implements clauses.

; --- types ------------------------------------------------------------------------------

(class_declaration
  name: (identifier) @name) @definition.class

(interface_declaration
  name: (identifier) @name) @definition.interface

(annotation_type_declaration
  name: (identifier) @name) @definition.interface

(enum_declaration
  name: (identifier) @name) @definition.enum

(record_declaration
  name: (identifier) @name) @definition.record

; --- methods ------------------------------------------------------------------------------
; Captured as functions; the extractor turns a function nested in a type into a method.

(method_declaration
  name: (identifier) @name) @definition.function

(constructor_declaration
  name: (identifier) @name) @definition.function

(compact_constructor_declaration
  name: (identifier) @name) @definition.function

; --- constants: static final fields -------------------------------------------------------

(field_declaration
  (modifiers "static" "final")
  declarator: (variable_declarator
    name: (identifier) @name) @definition.constant)

(field_declaration
  (modifiers "final" "static")
  declarator: (variable_declarator
    name: (identifier) @name) @definition.constant)

; --- imports --------------------------------------------------------------------------------

(import_declaration
  [(scoped_identifier) (identifier)] @name) @reference.import

; --- calls ----------------------------------------------------------------------------------

(method_invocation
  name: (identifier) @name) @reference.call

(object_creation_expression
  type: [
    (type_identifier) @name
    (generic_type (type_identifier) @name)
    (scoped_type_identifier (type_identifier) @name .)
    (generic_type (scoped_type_identifier (type_identifier) @name .))
  ]) @reference.call

; --- inheritance ----------------------------------------------------------------------------

(superclass
  [
    (type_identifier) @name
    (generic_type (type_identifier) @name)
    (scoped_type_identifier (type_identifier) @name .)
    (generic_type (scoped_type_identifier (type_identifier) @name .))
  ] @reference.inherit)

(super_interfaces
  (type_list
    [
      (type_identifier) @name
      (generic_type (type_identifier) @name)
      (scoped_type_identifier (type_identifier) @name .)
      (generic_type (scoped_type_identifier (type_identifier) @name .))
    ] @reference.inherit))

(extends_interfaces
  (type_list
    [
      (type_identifier) @name
      (generic_type (type_identifier) @name)
      (scoped_type_identifier (type_identifier) @name .)
      (generic_type (scoped_type_identifier (type_identifier) @name .))
    ] @reference.inherit))
