// The free-form JSON type the generated types use, for every module that imports this one.
@_exported public import GatehouseJSON
