#include "server/plugins/plugin_loader.h"

#include <dlfcn.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/backends/cpu/kernel_table.h"
#include "server/core/status.h"
#include "server/plugins/plugin_op.h"
#include "tensord/plugin.h"

namespace tensord::plugins {
namespace {

struct LoadedPlugin {
  std::string path;       // as given (messages)
  std::string canonical;  // resolved path: who owns the op names in the kernel table
  std::string origin;     // file name (ListOps origin, error metadata)
  std::vector<std::shared_ptr<const PluginOp>> ops;
};

// Unloads what a refused start opened; a successful start keeps every library loaded, since
// kernels and op entries point into them.
class Handles {
 public:
  Handles() = default;
  Handles(const Handles&) = delete;
  Handles& operator=(const Handles&) = delete;
  ~Handles() {
    for (void* h : handles_) dlclose(h);
  }
  void Add(void* handle) { handles_.push_back(handle); }
  void KeepAll() { handles_.clear(); }

 private:
  std::vector<void*> handles_;
};

// What tensord_plugin_init's register_op calls collect.
struct RegistrarState {
  std::string origin;
  std::vector<std::shared_ptr<const PluginOp>> ops;
  absl::Status first_error;
};

int32_t RegisterOp(tensord_plugin_registrar* self, const tensord_op_def* def) {
  auto* state = static_cast<RegistrarState*>(self->server_state);
  absl::StatusOr<PluginOp> op = def != nullptr
                                    ? ParseOpDef(*def, state->origin)
                                    : absl::InvalidArgumentError("register_op was given NULL");
  if (op.ok()) {
    for (const auto& earlier : state->ops) {
      if (earlier->name == op->name) {
        op = absl::InvalidArgumentError(absl::StrCat("op '", op->name, "' is registered twice"));
        break;
      }
    }
  }
  if (!op.ok()) {
    if (state->first_error.ok()) state->first_error = op.status();
    return tensord_fail(&self->error, TENSORD_ERR_INVALID, "%s",
                        std::string(op.status().message()).c_str());
  }
  state->ops.push_back(std::make_shared<const PluginOp>(*std::move(op)));
  return TENSORD_OK;
}

absl::Status Refuse(const std::string& path, absl::string_view what) {
  // tensord prints this as its one line on exit.
  std::string message = absl::StrCat("plugin ", path, ": ", what);
  std::replace(message.begin(), message.end(), '\n', ' ');
  return absl::InvalidArgumentError(message);
}

std::string FileName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

absl::StatusOr<LoadedPlugin> Open(const std::string& path, Handles& handles) {
  LoadedPlugin plugin;
  plugin.path = path;
  plugin.origin = FileName(path);
  char* resolved = realpath(path.c_str(), nullptr);
  if (resolved == nullptr) return Refuse(path, absl::StrCat("cannot open: ", std::strerror(errno)));
  plugin.canonical = resolved;
  std::free(resolved);

  dlerror();
  void* handle = dlopen(plugin.canonical.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return Refuse(path, absl::StrCat("cannot load: ", why ? why : "unknown dlopen error"));
  }
  handles.Add(handle);
  using VersionFn = uint32_t (*)();
  using InitFn = int32_t (*)(tensord_plugin_registrar*);
  auto version = reinterpret_cast<VersionFn>(dlsym(handle, "tensord_plugin_abi_version"));
  if (version == nullptr) {
    return Refuse(path,
                  "exports no tensord_plugin_abi_version(), so it is not a tensord plugin "
                  "(see docs/plugins.md)");
  }
  // Checked before anything else of the plugin runs: with another version even the
  // registrar's layout may differ.
  const uint32_t abi = version();
  if (abi != TENSORD_PLUGIN_ABI_VERSION) {
    return Refuse(path,
                  absl::StrCat("built for plugin ABI version ", abi,
                               ", but this server speaks version ", TENSORD_PLUGIN_ABI_VERSION,
                               "; rebuild it against this server's include/tensord/plugin.h"));
  }
  auto init = reinterpret_cast<InitFn>(dlsym(handle, "tensord_plugin_init"));
  if (init == nullptr) return Refuse(path, "exports no tensord_plugin_init()");

  RegistrarState state;
  state.origin = plugin.origin;
  tensord_plugin_registrar registrar;
  registrar.abi_version = TENSORD_PLUGIN_ABI_VERSION;
  registrar.register_op = &RegisterOp;
  registrar.error.code = TENSORD_OK;
  registrar.error.message[0] = '\0';
  registrar.server_state = &state;
  if (int32_t code = init(&registrar); code != TENSORD_OK) {
    registrar.error.message[TENSORD_PLUGIN_MAX_MESSAGE - 1] = '\0';
    std::string why = registrar.error.message;
    return Refuse(path, absl::StrCat("tensord_plugin_init failed with status code ", code,
                                     why.empty() ? "" : ": ", why));
  }
  if (!state.first_error.ok()) return Refuse(path, state.first_error.message());
  if (state.ops.empty()) return Refuse(path, "registers no ops");
  plugin.ops = std::move(state.ops);
  return plugin;
}

// Adds `def` of `plugin` to `registry`, refusing a name that is taken there or, for the
// kernel table, by another plugin file in this process.
absl::Status AddOp(OpRegistry& registry, const LoadedPlugin& plugin, OpDef def) {
  const std::string what =
      def.internal ? absl::StrCat("op '", def.name, "' (its backward kernel's helper op)")
                   : absl::StrCat("op '", def.name, "'");
  if (absl::StatusOr<const OpDef*> taken = registry.Find(def.name); taken.ok()) {
    const std::string& origin = (*taken)->origin;
    return Refuse(
        plugin.path,
        absl::StrCat(what, " clashes with ",
                     origin == "builtin" ? "the built-in op of that name"
                                         : absl::StrCat("the op of that name of plugin ", origin)));
  }
  const std::string owner = cpu::KernelTable::ExtensionOwner(def.name);
  if (!owner.empty() && owner != plugin.canonical) {
    return Refuse(plugin.path,
                  absl::StrCat(what, " is already served in this process by plugin ", owner,
                               "; an op name has one implementation per "
                               "process"));
  }
  absl::Status added = registry.Add(std::move(def));
  if (!added.ok()) return Refuse(plugin.path, added.message());
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<const OpRegistry>> RegistryWithPlugins(
    const OpRegistry& base, const std::vector<std::string>& paths) {
  auto registry = std::make_shared<OpRegistry>();
  for (const OpDef* def : base.All()) RETURN_IF_ERROR(registry->Add(*def));

  Handles handles;
  std::vector<LoadedPlugin> plugins;
  std::map<std::string, std::string> given;  // canonical path -> path as given
  for (const std::string& path : paths) {
    ASSIGN_OR_RETURN(LoadedPlugin plugin, Open(path, handles));
    auto [it, inserted] = given.emplace(plugin.canonical, path);
    if (!inserted) {
      return Refuse(path, absl::StrCat("is the same file as plugin ", it->second, ", given twice"));
    }
    for (const std::shared_ptr<const PluginOp>& op : plugin.ops) {
      for (OpDef& def : MakeOpDefs(op)) RETURN_IF_ERROR(AddOp(*registry, plugin, std::move(def)));
    }
    plugins.push_back(std::move(plugin));
  }

  // From here on kernels point into the libraries, so they must never be unloaded.
  handles.KeepAll();
  for (const LoadedPlugin& plugin : plugins) {
    for (const std::shared_ptr<const PluginOp>& op : plugin.ops) {
      for (auto& [name, kernel] : MakeKernels(op)) {
        absl::Status added = cpu::KernelTable::AddExtension(name, plugin.canonical, kernel);
        if (!added.ok()) return Refuse(plugin.path, added.message());
      }
    }
  }
  return std::shared_ptr<const OpRegistry>(std::move(registry));
}

}  // namespace tensord::plugins
