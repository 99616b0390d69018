// The free-form JSON type the generated types use, for the SDK's files that import this module.
@_exported public import GatehouseJSON
