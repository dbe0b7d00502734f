/**
 * The types PostgreSQL 15 gives the columns of its catalog (the tables and views of pg_catalog and
 * information_schema, whose domains arrive as their base types) where DuckDB would announce another:
 * `name`, `"char"`, `oid`, `int2` and `varchar`, by column name (the catalog's column names are unique to
 * their relation, and each of these has one type in all of PostgreSQL 15's catalog), and the types of
 * the catalog functions clients select. Read from a PostgreSQL 15 (pg_attribute of those relations);
 * test/pgCatalogReference.test.ts compares the answers with a live one. A catalog answer's column that
 * selects one of these as it is is announced in its PostgreSQL type (columnNames.ts).
 */

const BY_TYPE: Record<string, string> = {
  char:
    'aggfinalmodify aggkind aggmfinalmodify amoppurpose amtype attalign attcompression attgenerated attidentity ' +
    'attstorage castcontext castmethod collprovider confdeltype confmatchtype confupdtype contype datlocprovider ' +
    'defaclobjtype deptype ev_enabled ev_type evtenabled oprkind partstrat polcmd privtype prokind proparallel ' +
    'provolatile relkind relpersistence relreplident srsubstate subtwophasestate tgenabled typalign typcategory ' +
    'typdelim typstorage typtype',
  int2:
    'adnum aggnumdirectargs amopstrategy amprocnum attlen attnum indnatts indnkeyatts partnatts pronargdefaults ' +
    'pronargs relchecks relnatts staattnum stakind1 stakind2 stakind3 stakind4 stakind5 tgnargs tgtype tuple typlen',
  name:
    'action_reference_new_row action_reference_new_table action_reference_old_row action_reference_old_table amname ' +
    'attname attribute_name attribute_udt_catalog attribute_udt_name attribute_udt_schema authorization_identifier ' +
    'catalog_name cfgname character_repertoire character_set_catalog character_set_name character_set_schema ' +
    'collation_catalog collation_name collation_schema collection_type_identifier collname column_name conname ' +
    'constraint_catalog constraint_name constraint_schema datname default_character_set_catalog ' +
    'default_character_set_name default_character_set_schema default_collate_catalog default_collate_name ' +
    'default_collate_schema dependent_column dictname domain_catalog domain_name domain_schema dtd_identifier ' +
    'enumlabel event_object_catalog event_object_column event_object_schema event_object_table evtevent evtname ' +
    'extname fdwname foreign_data_wrapper_catalog foreign_data_wrapper_name foreign_server_catalog ' +
    'foreign_server_name foreign_table_catalog foreign_table_name foreign_table_schema form_of_use funcname grantee ' +
    'groname group_name indexname indexrelname lanname matviewname matviewowner module_catalog module_name ' +
    'module_schema nspname object_catalog object_name object_schema opcname opfname oprname option_name ' +
    'ordering_routine_catalog ordering_routine_name ordering_routine_schema owner parameter_name plugin policyname ' +
    'polname proname prsname pubname ref_dtd_identifier relname result_cast_char_set_catalog ' +
    'result_cast_char_set_name result_cast_char_set_schema result_cast_collation_catalog result_cast_collation_name ' +
    'result_cast_collation_schema result_cast_dtd_identifier result_cast_scope_catalog result_cast_scope_name ' +
    'result_cast_scope_schema result_cast_type_udt_catalog result_cast_type_udt_name result_cast_type_udt_schema ' +
    'role_name rolname routine_catalog routine_name routine_schema rulename schema schema_name schema_owner ' +
    'schemaname scope_catalog scope_name scope_schema self_referencing_column_name sequence_catalog sequence_name ' +
    'sequence_schema sequencename sequenceowner source_dtd_identifier spcname specific_catalog specific_name ' +
    'specific_schema srvname statistics_name statistics_owner statistics_schemaname stxname subname subslotname ' +
    'table_catalog table_name table_schema tablename tableowner tablespace tgname tgnewtable tgoldtable tmplname ' +
    'to_sql_specific_catalog to_sql_specific_name to_sql_specific_schema trigger_catalog trigger_name ' +
    'trigger_schema type_udt_catalog type_udt_name type_udt_schema typname udt_catalog udt_name udt_schema ' +
    'unique_constraint_catalog unique_constraint_name unique_constraint_schema usename user_defined_type_catalog ' +
    'user_defined_type_name user_defined_type_schema view_catalog view_name view_schema viewname viewowner',
  oid:
    'adrelid aggmtranstype aggsortop aggtranstype amopfamily amoplefttype amopmethod amopopr amoprighttype ' +
    'amopsortfamily amprocfamily amproclefttype amprocrighttype attcollation attrelid atttypid castfunc castsource ' +
    'casttarget cfgnamespace cfgowner cfgparser classid classoid cluster_index_relid collnamespace collowner ' +
    'confrelid conindid connamespace conowner conparentid conrelid contypid current_child_table_relid datdba datid ' +
    'datoid dattablespace dbid defaclnamespace defaclrole dictnamespace dictowner dicttemplate enumtypid ev_class ' +
    'evtfoid evtowner extnamespace extowner fdwhandler fdwowner fdwvalidator ftrelid ftserver funcid grosysid ' +
    'index_relid indexrelid indrelid inhparent inhrelid laninline lanowner lanplcallfoid lanvalidator local_id loid ' +
    'lomowner mapcfg mapdict member nspowner objid objnamespace objoid oid opcfamily opcintype opckeytype opcmethod ' +
    'opcnamespace opcowner opfmethod opfnamespace opfowner oprcom oprleft oprnamespace oprnegate oprowner oprresult ' +
    'oprright partdefid partrelid pnnspid pnpubid polrelid prolang pronamespace proowner prorettype provariadic ' +
    'prpubid prrelid prsnamespace pubowner refclassid refobjid relam relation relfilenode relid relnamespace ' +
    'reloftype relowner relrewrite reltablespace reltoastrelid reltype rngcollation rngmultitypid rngsubopc ' +
    'rngsubtype rngtypid roident roleid seqrelid seqtypid setdatabase setrole spcowner srrelid srsubid srvfdw srvid ' +
    'stacoll1 stacoll2 stacoll3 stacoll4 stacoll5 staop1 staop2 staop3 staop4 staop5 starelid stxnamespace stxoid ' +
    'stxowner stxrelid subdbid subid subowner tgconstraint tgconstrindid tgconstrrelid tgfoid tgparentid tgrelid ' +
    'tmplnamespace trflang trftype typarray typbasetype typcollation typelem typnamespace typowner typrelid umid ' +
    'umserver umuser usesysid',
  varchar:
    'action_condition action_orientation action_statement action_timing as_locator attribute_default ' +
    'character_value check_clause check_option column_default comments commit_action constraint_type cycle_option ' +
    'delete_rule domain_default enforced event_manipulation external_language external_name feature_id feature_name ' +
    'foreign_data_wrapper_language foreign_server_type foreign_server_version generation_expression identity_cycle ' +
    'identity_generation identity_increment identity_maximum identity_minimum identity_start implementation_info_id ' +
    'implementation_info_name increment initially_deferred interval_type is_deferrable ' +
    'is_derived_reference_attribute is_deterministic is_final is_generated is_grantable is_identity ' +
    'is_implicitly_invocable is_insertable_into is_instantiable is_null_call is_nullable is_result ' +
    'is_self_referencing is_supported is_trigger_deletable is_trigger_insertable_into is_trigger_updatable is_typed ' +
    'is_udt_dependent is_updatable is_user_defined_cast is_verified_by library_name match_option maximum_value ' +
    'minimum_value new_savepoint_level nulls_distinct object_type option_value ordering_category ordering_form ' +
    'pad_attribute parameter_default parameter_mode parameter_style privilege_type reference_generation ' +
    'reference_type result_cast_as_locator result_cast_from_data_type result_cast_interval_type routine_body ' +
    'routine_definition routine_type schema_level_routine security_type sizing_name sql_data_access sql_path ' +
    'sub_feature_id sub_feature_name table_type transform_type update_rule user_defined_type_category ' +
    'view_definition with_hierarchy',
};

/** Catalog column name → its PostgreSQL 15 type name. */
export const CATALOG_COLUMN_TYPES: ReadonlyMap<string, string> = new Map(
  Object.entries(BY_TYPE).flatMap(([type, names]) => names.split(' ').map((name) => [name, type] as [string, string])),
);

/** Catalog functions whose PostgreSQL 15 result type DuckDB's macro does not give (pg_proc.prorettype). */
export const CATALOG_FUNCTION_TYPES: ReadonlyMap<string, string> = new Map([
  ['pg_get_userbyid', 'name'], ['pg_encoding_to_char', 'name'], ['current_schema', 'name'], ['current_database', 'name'],
  ['current_user', 'name'], ['session_user', 'name'], ['current_catalog', 'name'], ['user', 'name'],
  ['col_description', 'text'], ['obj_description', 'text'], ['shobj_description', 'text'], ['format_type', 'text'],
]);
