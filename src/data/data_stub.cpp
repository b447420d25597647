// Placeholder so the module links until its first real file lands; delete it then.
namespace dtrain { void data_stub() {} }
