// ltx2k native launch memo: one C call that replays a launch the Python path already made.
//
// Why C++ at all: on the H200 runners one Python-level call into torch costs
// ~7-9 us (a torch.empty, a torch.add), so validation + allocation + a Triton
// launch from Python cannot get under ~25 us per call, while eager PyTorch pays
// one C++ dispatch. This module folds the whole call into one C function.
//
// The contract (ltx2k/kernels/_native.py is the Python side and says more):
// a "site" is one public function. Its Python path validates, allocates,
// launches through Triton's normal kernel[grid] and then *records* the launch
// here, keyed by everything the Python path's decisions depend on: each input
// tensor's sizes, strides, dtype, device and data_ptr % 128. A later call whose
// inputs have the same key would take exactly the same decisions (same
// validation verdict, same output shapes, same grid, same scalars), so call()
// replays them: allocate the outputs, fill the pointers, cuLaunchKernel. A site has
// one output (returned as it is, or as its unbind(0) views) or several (returned as a
// tuple, each its own allocation, as the Python path's torch.empty calls make them). Which
// binary kernel[grid] would launch is Triton's decision, so each replay first
// asks Triton's own in-memory cache (see triton_still_selects). Any miss, or
// anything unusual, returns None and the caller takes the Python path, so this
// can be slower but never differently right.
//
// Failure safety: this is a library call inside someone else's process, and a C++
// exception escaping a Python C function ends that process (std::terminate). So every
// entry point runs its body inside try/catch(...): in call() and probe() any C++
// exception is a miss (the Python path then gives the result or raises the Python
// exception the other variants raise), elsewhere it becomes a RuntimeError. Before
// any tensor's data is touched, replayable() and plain_context() refuse what the
// replay cannot read directly (functorch wrappers, functionalization, Python
// subclasses and modes, tensors without storage, symbolic or nested sizes, non-CUDA
// devices other than the CPU); the Python side refuses the common cases even earlier.
//
// No CUDA headers: the driver entry points are looked up with dlsym, and the
// current stream comes from PyTorch's stable C shim (the call AOTInductor's
// generated code makes), so this builds against a CPU-only torch as well.

#include <Python.h>

#include <ATen/PythonTorchFunctionTLS.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/DispatchKeySet.h>
#include <c10/core/GradMode.h>
#include <c10/core/TensorOptions.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <c10/util/Exception.h>
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/autograd/python_variable.h>

#include <dlfcn.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace {

using CUresult = int;
using CUfunction = void*;
using CUstream = void*;
using CUcontext = void*;
using cuLaunchKernel_t = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned,
                                      unsigned, unsigned, unsigned, CUstream, void**, void**);
// cuLaunchKernelEx's configuration, laid out as in cuda.h (CUDA 12): only what a launch
// with programmatic stream serialization (programmatic dependent launch) sets.
struct CUlaunchAttribute {
  int id;  // CUlaunchAttributeID
  char pad[8 - sizeof(int)];
  union {
    char bytes[64];  // CUlaunchAttributeValue is a 64-byte union
    int programmatic_stream_serialization_allowed;
  } value;
};
struct CUlaunchConfig {
  unsigned grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes;
  CUstream stream;
  CUlaunchAttribute* attrs;
  unsigned n_attrs;
};
static_assert(sizeof(CUlaunchAttribute) == 72, "CUlaunchAttribute as in cuda.h");
constexpr int kLaunchAttributeProgrammaticStreamSerialization = 6;
using cuLaunchKernelEx_t = CUresult (*)(const CUlaunchConfig*, CUfunction, void**, void**);
using cuCtxGetCurrent_t = CUresult (*)(CUcontext*);
using cuGetErrorString_t = CUresult (*)(CUresult, const char**);
using get_stream_t = int32_t (*)(int32_t, void**);  // aoti_torch_get_current_cuda_stream

struct Driver {
  bool tried = false;
  std::string error;  // non-empty: unavailable, and why
  cuLaunchKernel_t launch = nullptr;
  cuLaunchKernelEx_t launch_ex = nullptr;  // null on a driver without it: no PDL replays
  cuCtxGetCurrent_t ctx_current = nullptr;
  cuGetErrorString_t error_string = nullptr;
  get_stream_t stream = nullptr;
};
Driver g_driver;  // written once, under the GIL, by the first driver_ready()

// RTLD_NOLOAD: only libraries PyTorch already loaded; this module never loads CUDA itself.
void* find(const char* lib, const char* sym, std::string& error) {
  void* handle = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr) {
    error = std::string(lib) + " is not loaded";
    return nullptr;
  }
  void* p = dlsym(handle, sym);
  if (p == nullptr) error = std::string(sym) + " not found in " + lib;
  return p;
}

bool driver_ready() {
  if (!g_driver.tried) {
    g_driver.tried = true;
    std::string e;
    g_driver.launch = reinterpret_cast<cuLaunchKernel_t>(find("libcuda.so.1", "cuLaunchKernel", e));
    std::string optional;
    g_driver.launch_ex =
        reinterpret_cast<cuLaunchKernelEx_t>(find("libcuda.so.1", "cuLaunchKernelEx", optional));
    g_driver.ctx_current =
        reinterpret_cast<cuCtxGetCurrent_t>(find("libcuda.so.1", "cuCtxGetCurrent", e));
    g_driver.error_string =
        reinterpret_cast<cuGetErrorString_t>(find("libcuda.so.1", "cuGetErrorString", e));
    g_driver.stream = reinterpret_cast<get_stream_t>(
        find("libtorch_cuda.so", "aoti_torch_get_current_cuda_stream", e));
    if (!g_driver.launch || !g_driver.ctx_current || !g_driver.error_string || !g_driver.stream)
      g_driver.error = e.empty() ? "CUDA driver entry points not found" : e;
  }
  return g_driver.error.empty();
}

// An owned Python reference. Entries are destroyed only inside entry points (which
// hold the GIL) and never at interpreter exit (sites are never freed, see g_sites),
// so the decref always runs with the GIL held.
class Ref {
 public:
  Ref() = default;
  explicit Ref(PyObject* borrowed) : p_(borrowed) { Py_XINCREF(p_); }
  Ref(const Ref&) = delete;
  Ref& operator=(const Ref&) = delete;
  ~Ref() { Py_XDECREF(p_); }
  PyObject* get() const { return p_; }
  void reset(PyObject* borrowed) {
    Py_XINCREF(borrowed);
    Py_XDECREF(p_);
    p_ = borrowed;
  }

 private:
  PyObject* p_ = nullptr;
};

enum ArgKind : int { ARG_INPUT = 0, ARG_OUTPUT = 1, ARG_I32 = 2, ARG_I64 = 3 };

struct Arg {
  int kind;
  int64_t value;  // input index, output index, or the scalar
};

// One output of a recorded launch: what the replay allocates with at::empty.
struct Output {
  std::vector<int64_t> sizes;
  c10::ScalarType dtype = c10::ScalarType::BFloat16;
  c10::Device device = c10::Device(c10::DeviceType::CPU);
  int64_t align = 0;  // data_ptr % kAlignKey of the recorded output (the binary's class)
};

// One recorded launch. Immutable once published: record() builds a new Entry and swaps
// the map's shared_ptr, so a call that copied the old pointer keeps a whole, live entry
// even if another thread (or Python code run by a guard's attribute read, which can
// switch threads) replaces or clears it meanwhile.
struct Entry {
  CUfunction function = nullptr;
  CUcontext context = nullptr;
  int32_t device = 0;  // current device at record time (its stream is the launch stream)
  unsigned grid[3] = {1, 1, 1};
  unsigned block = 32;
  unsigned shared = 0;
  bool pdl = false;  // launched with programmatic dependent launch
  std::vector<Arg> args;
  std::vector<Output> outputs;  // the site's n_outputs, in the order call() returns them
  // What selected the binary (triton_still_selects): the JITFunction, the key of its
  // per-device caches, the key Triton's in-memory cache holds the launch under, the
  // CompiledKernel there (also keeps its module and function loaded), and the two
  // launch-time values JITFunction.run folds into that key (debug, instrumentation_mode).
  Ref kernel, device_key, cache_key, compiled, debug, instrumentation;
};

using EntryPtr = std::shared_ptr<const Entry>;

struct KeyHash {
  size_t operator()(const std::vector<int64_t>& k) const noexcept {
    uint64_t h = 1469598103934665603ull;  // FNV-1a over the words
    for (int64_t v : k) h = (h ^ static_cast<uint64_t>(v)) * 1099511628211ull;
    return static_cast<size_t>(h);
  }
};

using EntryMap = std::unordered_map<std::vector<int64_t>, EntryPtr, KeyHash>;

struct Site {
  std::string name;
  int n_inputs = 0;
  int n_outputs = 1;    // > 1: call() returns a tuple of that many separate tensors
  bool unbind = false;  // return out.unbind(0) instead of out (one output only)
  // Guards `entries` and `last_error`. Held only around map operations, never while
  // Python code can run (an entry's destruction decrefs Python objects, so replaced or
  // cleared entries are destroyed after unlocking): a thread blocked on this mutex while
  // holding the GIL must never wait for one that needs the GIL to finish.
  std::mutex mutex;
  EntryMap entries;
  std::string last_error;  // the last C++ exception or launch failure turned into a miss
  std::atomic<uint64_t> hits{0};
  std::atomic<uint64_t> misses{0};
};

constexpr size_t kMaxEntries = 4096;  // as _launch.MAX_ENTRIES: a shape sweep starts over
constexpr int64_t kAlignKey = 128;    // as _launch.ALIGN_KEY, finer than Triton's 16
constexpr int kMaxSites = 256;        // one per (public function, variant); tests add a few
constexpr int kMaxOutputs = 4;        // as _native.MAX_OUTPUTS: q and k need two

// Sites live at fixed addresses for the life of the process: a Site* taken by one
// call stays valid while another thread adds a site (a std::vector<Site> would move
// them on reallocation). Never freed, so nothing is decref'd after Python finalizes.
std::array<std::atomic<Site*>, kMaxSites> g_sites{};
std::atomic<int> g_n_sites{0};
std::mutex g_new_site_mutex;

PyObject* g_runtime_knobs = nullptr;
PyObject* g_compilation_knobs = nullptr;
PyObject *s_enter, *s_exit, *s_calls, *s_debug, *s_instrumentation, *s_pre_run_hooks,
    *s_device_caches, *s_counts;

// Tests set this to make the next call/probe/record throw inside its try block: the
// only way to run those catch paths on purpose (nothing valid throws there).
std::atomic<int> g_fault{0};
enum Fault : int { FAULT_NONE = 0, FAULT_C10 = 1, FAULT_STD = 2, FAULT_OTHER = 3 };

void maybe_fault() {
  if (C10_LIKELY(g_fault.load(std::memory_order_relaxed) == FAULT_NONE)) return;
  switch (g_fault.exchange(FAULT_NONE)) {
    case FAULT_C10:
      TORCH_CHECK(false, "injected c10::Error");
    case FAULT_STD:
      throw std::runtime_error("injected std::runtime_error");
    case FAULT_OTHER:
      throw 42;  // not a std::exception: only catch (...) sees it
    default:
      return;
  }
}

// A C++ exception's message for a Python error or a site's last_error.
std::string describe(const std::exception_ptr& ex) {
  try {
    std::rethrow_exception(ex);
  } catch (const c10::Error& e) {
    return std::string("c10::Error: ") + e.what_without_backtrace();
  } catch (const std::exception& e) {
    return std::string("C++ exception: ") + e.what();
  } catch (...) {
    return "a C++ exception that is not a std::exception";
  }
}

// Runs an entry point's body; any C++ exception becomes a RuntimeError (or the Python
// error a failed Python API call inside the body already set).
template <class Body>
PyObject* guarded(Body&& body) {
  try {
    return body();
  } catch (...) {
    std::string msg;
    try {
      msg = describe(std::current_exception());
    } catch (...) {
      msg = "a C++ exception";  // describing it failed too (out of memory)
    }
    if (!PyErr_Occurred()) PyErr_Format(PyExc_RuntimeError, "ltx2k native: %s", msg.c_str());
    return nullptr;
  }
}

void note_error(Site& site, const std::exception_ptr& ex) {
  try {
    std::string msg = describe(ex);
    std::lock_guard<std::mutex> lock(site.mutex);
    site.last_error = std::move(msg);
  } catch (...) {
    // out of memory while noting it: the miss itself is what matters
  }
}

Site* site_of(PyObject* obj) {
  long id = PyLong_AsLong(obj);
  if (id == -1 && PyErr_Occurred()) return nullptr;
  if (id < 0 || id >= g_n_sites.load(std::memory_order_acquire)) {
    PyErr_Format(PyExc_ValueError, "site must be an id from new_site(), got %ld", id);
    return nullptr;
  }
  return g_sites[static_cast<size_t>(id)].load(std::memory_order_acquire);
}

EntryPtr find_entry(Site& site, const std::vector<int64_t>& key) {
  std::lock_guard<std::mutex> lock(site.mutex);
  auto it = site.entries.find(key);
  return it == site.entries.end() ? nullptr : it->second;
}

// Replaces (or removes, with a null entry) key's entry; the old one is destroyed by the
// caller's scope after the lock is released.
EntryPtr put_entry(Site& site, std::vector<int64_t> key, EntryPtr entry, EntryMap& evicted) {
  std::lock_guard<std::mutex> lock(site.mutex);
  EntryPtr old;
  if (entry && site.entries.size() >= kMaxEntries) evicted.swap(site.entries);
  auto it = site.entries.find(key);
  if (it != site.entries.end()) {
    old = std::move(it->second);
    if (entry)
      it->second = std::move(entry);
    else
      site.entries.erase(it);
  } else if (entry) {
    site.entries.emplace(std::move(key), std::move(entry));
  }
  return old;
}

// Functionality keys of tensors whose data the replay cannot read as a plain strided
// buffer: functorch's vmap (batched) and grad/jvp wrappers, functionalization,
// Python subclasses, nested, sparse, quantized, lazily negated/conjugated views and
// ZeroTensor. Such tensors raise (or abort) on data_ptr(), or mean something else there.
const c10::DispatchKeySet kNotReplayable({
    c10::DispatchKey::FuncTorchBatched,
    c10::DispatchKey::FuncTorchGradWrapper,
    c10::DispatchKey::BatchedNestedTensor,
    c10::DispatchKey::Functionalize,
    c10::DispatchKey::Python,
    c10::DispatchKey::PythonTLSSnapshot,
    c10::DispatchKey::NestedTensor,
    c10::DispatchKey::Sparse,
    c10::DispatchKey::SparseCsr,
    c10::DispatchKey::Quantized,
    c10::DispatchKey::Negative,
    c10::DispatchKey::Conjugate,
    c10::DispatchKey::ZeroTensor,
});

// True for a plain dense tensor on the CPU or a CUDA device, whose sizes, strides and
// data pointer can be read without throwing. CPU: the memo's tests run on CPU tensors;
// CPU keys never match a recorded CUDA launch.
// torch.nn.Parameter, set at import. A Parameter is a Python subclass that only marks a
// module's tensors: it defines no __torch_function__ or __torch_dispatch__ of its own
// (torch functions see it as a plain tensor), so its data and metadata are a plain
// tensor's. A model's weights are Parameters; serving calls the kernels with them.
PyTypeObject* s_parameter_type = nullptr;

// A plain torch.Tensor or an nn.Parameter exactly; any other subclass decides for itself.
inline bool plain_type(PyObject* obj) {
  return THPVariable_CheckExact(obj) ||
         (s_parameter_type != nullptr && Py_TYPE(obj) == s_parameter_type);
}

bool replayable(PyObject* obj) {
  if (!plain_type(obj)) return false;  // subclasses: __torch_function__ decides
  const at::Tensor& t = THPVariable_Unpack(obj);
  if (!t.defined()) return false;
  // Autograd: a replayed output would have no grad_fn (grad mode on), or would drop a
  // forward-mode tangent (eager forward AD has one level, 0). The Python path sends
  // these calls to the registered ops. Checked here, not in Python: two reads in C++.
  if (t.requires_grad() && c10::GradMode::is_enabled()) return false;
  if (t._fw_grad(0).defined()) return false;
  const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  if (impl->key_set().has_any(kNotReplayable) || impl->is_python_dispatch()) return false;
  const c10::DeviceType dev = impl->device_type();
  if (dev != c10::DeviceType::CUDA && dev != c10::DeviceType::CPU) return false;  // meta too
  return impl->layout() == c10::kStrided && !impl->is_nested() &&
         !impl->has_symbolic_sizes_strides() && impl->has_storage() && impl->dtype_initialized();
}

// True while nothing above the tensors changes what an op means on this thread: no
// functorch transform (vmap/grad/jvp levels), no TorchDispatchMode (FakeTensorMode,
// FunctionalTensorMode, make_fx's proxy mode, ...), no TorchFunctionMode (a
// `with torch.device(...)` block is one). The other variants' torch.empty would go
// through them; at::empty here would not, or would return a tensor without storage.
bool plain_context() {
  return !c10::impl::tls_is_dispatch_key_included(
             c10::DispatchKey::FuncTorchDynamicLayerFrontMode) &&
         !c10::impl::tls_is_dispatch_key_included(c10::DispatchKey::Python) &&
         !c10::impl::TorchDispatchModeTLS::any_modes_set() &&
         !at::impl::torch_function_mode_enabled();
}

// The key of one call's inputs; false if an input is not replayable().
bool build_key(PyObject* const* tensors, Py_ssize_t n, std::vector<int64_t>& key) {
  key.clear();
  key.reserve(n * 12);
  for (Py_ssize_t i = 0; i < n; ++i) {
    if (!replayable(tensors[i])) return false;
    const at::Tensor& t = THPVariable_Unpack(tensors[i]);
    const int64_t dim = t.dim();
    key.push_back(dim);
    for (int64_t d = 0; d < dim; ++d) key.push_back(t.sizes()[d]);
    for (int64_t d = 0; d < dim; ++d) key.push_back(t.strides()[d]);
    key.push_back(static_cast<int64_t>(t.scalar_type()));
    key.push_back(static_cast<int64_t>(t.device().type()));
    key.push_back(t.device().index());
    // const: a copy-on-write tensor is not materialized just to be looked at
    key.push_back(
        static_cast<int64_t>(reinterpret_cast<uintptr_t>(t.const_data_ptr()) % kAlignKey));
  }
  return true;
}

bool hook_chain_empty(PyObject* knobs, PyObject* name) {
  PyObject* hook = PyObject_GetAttr(knobs, name);
  if (hook == nullptr) return false;
  bool empty = hook == Py_None;
  if (!empty) {
    PyObject* calls = PyObject_GetAttr(hook, s_calls);
    empty = calls != nullptr && PyList_Check(calls) && PyList_GET_SIZE(calls) == 0;
    Py_XDECREF(calls);
  }
  Py_DECREF(hook);
  return empty;
}

// Whether kernel[grid] would, right now, launch exactly the binary this entry holds.
// Triton 3.6's JITFunction.run looks the launch up in kernel.device_caches[device][0]
// under a key made of the arguments' specialization (a function of this memo's key)
// and its options: num_warps (fixed per entry), `kernel.debug or knobs.runtime.debug`
// and knobs.compilation.instrumentation_mode, read at each launch. So: the same two
// option values, and the same CompiledKernel object under the recorded key. Knobs
// that only compile() reads (default_fp_fusion, fp32_default, ptxas options) change
// the binary only when Triton compiles again, which replaces that cache entry (or
// the whole cache): a miss here, and the Python path records the new binary.
bool triton_still_selects(const Entry& e) {
  // `kernel.debug or knobs.runtime.debug`, as JITFunction.run computes it
  PyObject* debug = PyObject_GetAttr(e.kernel.get(), s_debug);
  if (debug == nullptr) return false;
  const int truthy = PyObject_IsTrue(debug);
  if (truthy != 1) {
    Py_DECREF(debug);
    if (truthy < 0) return false;
    debug = PyObject_GetAttr(g_runtime_knobs, s_debug);
    if (debug == nullptr) return false;
  }
  bool ok = PyObject_RichCompareBool(debug, e.debug.get(), Py_EQ) == 1;
  Py_DECREF(debug);
  if (!ok) return false;
  PyObject* instr = PyObject_GetAttr(g_compilation_knobs, s_instrumentation);
  ok = instr != nullptr && PyObject_RichCompareBool(instr, e.instrumentation.get(), Py_EQ) == 1;
  Py_XDECREF(instr);
  if (!ok) return false;
  PyObject* caches = PyObject_GetAttr(e.kernel.get(), s_device_caches);
  if (caches == nullptr) return false;
  ok = false;
  if (PyDict_Check(caches)) {  // a defaultdict; GetItem never calls its factory
    PyObject* per_device = PyDict_GetItemWithError(caches, e.device_key.get());  // borrowed
    if (per_device != nullptr && PyTuple_Check(per_device) && PyTuple_GET_SIZE(per_device) > 0 &&
        PyDict_Check(PyTuple_GET_ITEM(per_device, 0))) {
      PyObject* compiled =
          PyDict_GetItemWithError(PyTuple_GET_ITEM(per_device, 0), e.cache_key.get());
      ok = compiled != nullptr && compiled == e.compiled.get();
    }
  }
  Py_DECREF(caches);
  return ok;
}

// True while nothing that the Python path would see differently is set: a profiler's
// launch hooks, the kernel's pre-run hooks, and Triton selecting another binary.
// Attribute reads and dict lookups only (~0.1 us each).
bool guards_hold(const Entry& e) {
  if (g_runtime_knobs == nullptr || g_compilation_knobs == nullptr) return false;
  if (!hook_chain_empty(g_runtime_knobs, s_enter) || !hook_chain_empty(g_runtime_knobs, s_exit))
    return false;
  PyObject* pre = PyObject_GetAttr(e.kernel.get(), s_pre_run_hooks);
  bool ok = pre != nullptr && PyList_Check(pre) && PyList_GET_SIZE(pre) == 0;
  Py_XDECREF(pre);
  return ok && triton_still_selects(e);
}

// The entry call() would replay for these inputs, or null. Python errors raised by the
// guards' attribute reads mean "not eligible" and are cleared by the caller.
EntryPtr lookup(Site& site, PyObject* const* inputs, Py_ssize_t n) {
  maybe_fault();
  if (!plain_context()) return nullptr;
  static thread_local std::vector<int64_t> key;
  if (!build_key(inputs, n, key)) return nullptr;
  EntryPtr e = find_entry(site, key);
  if (!e || !guards_hold(*e)) return nullptr;
  return e;
}

// A replay's outputs: a fixed array, so that one output costs no heap allocation.
using Outputs = std::array<at::Tensor, kMaxOutputs>;

// A tuple of tensors[0..n) (moved from), or nullptr with a Python error set.
template <class Tensors>
PyObject* tuple_of(Tensors& tensors, size_t n) {
  PyObject* tuple = PyTuple_New(static_cast<Py_ssize_t>(n));
  if (tuple == nullptr) return nullptr;
  for (size_t i = 0; i < n; ++i) {
    PyObject* v = THPVariable_Wrap(std::move(tensors[i]));
    if (v == nullptr) {
      Py_DECREF(tuple);
      return nullptr;
    }
    PyTuple_SET_ITEM(tuple, static_cast<Py_ssize_t>(i), v);
  }
  return tuple;
}

// What call() returns: the one output, its unbind(0) views, or a tuple of the outputs.
PyObject* wrap_outputs(const Site& site, Outputs& outs, size_t n_out) {
  if (n_out > 1) return tuple_of(outs, n_out);
  if (!site.unbind) return THPVariable_Wrap(std::move(outs[0]));
  std::vector<at::Tensor> views = outs[0].unbind(0);
  return tuple_of(views, views.size());
}

// The replay. Returns the output(s), Py_None for a miss, or nullptr with a Python error
// set where a Python API call failed after the launch.
PyObject* replay(Site& site, PyObject* const* inputs, Py_ssize_t n) {
  EntryPtr held = lookup(site, inputs, n);
  if (!held || !driver_ready()) return Py_None;
  const Entry& e = *held;
  // Only what a real launch recorded: CUDA outputs, a function and a context. (A thread
  // that never touched CUDA has no current context, and must not match a null one.)
  const size_t n_out = e.outputs.size();
  if (n_out == 0 || n_out > kMaxOutputs || e.function == nullptr || e.context == nullptr)
    return Py_None;
  for (const Output& o : e.outputs)
    if (!o.device.is_cuda()) return Py_None;
  CUcontext ctx = nullptr;
  // another device (or none) is current: the Python path decides
  if (g_driver.ctx_current(&ctx) != 0 || ctx == nullptr || ctx != e.context) return Py_None;
  void* stream = nullptr;
  if (g_driver.stream(e.device, &stream) != 0) return Py_None;
  // Out of memory throws here: a miss, and the Python path raises torch.OutOfMemoryError.
  // Each output is its own allocation, as the Python path's torch.empty calls make them.
  Outputs outs;
  uint64_t out_ptrs[kMaxOutputs];
  for (size_t j = 0; j < n_out; ++j) {
    const Output& o = e.outputs[j];
    outs[j] = at::empty(o.sizes, at::TensorOptions().dtype(o.dtype).device(o.device));
    out_ptrs[j] = reinterpret_cast<uintptr_t>(outs[j].const_data_ptr());
    // compiled for another alignment: the Python path re-specializes
    if (static_cast<int64_t>(out_ptrs[j] % kAlignKey) != o.align) return Py_None;
  }
  // Parameter storage in the order of the compiled kernel's signature, then
  // Triton 3.6's two trailing scratch pointers (null: recorded only without scratch).
  const size_t n_args = e.args.size();
  if (n_args > 64) return Py_None;
  uint64_t storage[64];
  void* params[66];
  for (size_t i = 0; i < n_args; ++i) {
    const Arg& a = e.args[i];
    switch (a.kind) {
      case ARG_INPUT:
        storage[i] =
            reinterpret_cast<uintptr_t>(THPVariable_Unpack(inputs[a.value]).const_data_ptr());
        break;
      case ARG_OUTPUT:  // record() checked the index against the site's n_outputs
        storage[i] = out_ptrs[a.value];
        break;
      case ARG_I32: {
        int32_t v = static_cast<int32_t>(a.value);
        storage[i] = 0;
        std::memcpy(&storage[i], &v, sizeof v);
        break;
      }
      default:
        storage[i] = static_cast<uint64_t>(a.value);
    }
    params[i] = &storage[i];
  }
  uint64_t scratch[2] = {0, 0};
  params[n_args] = &scratch[0];
  params[n_args + 1] = &scratch[1];
  CUresult r;
  if (e.pdl) {  // as Triton's launcher launches it (record() checked launch_ex is there)
    CUlaunchAttribute attr{};
    attr.id = kLaunchAttributeProgrammaticStreamSerialization;
    attr.value.programmatic_stream_serialization_allowed = 1;
    CUlaunchConfig config{};
    config.grid_x = e.grid[0];
    config.grid_y = e.grid[1];
    config.grid_z = e.grid[2];
    config.block_x = e.block;
    config.block_y = 1;
    config.block_z = 1;
    config.shared_bytes = e.shared;
    config.stream = stream;
    config.attrs = &attr;
    config.n_attrs = 1;
    r = g_driver.launch_ex(&config, e.function, params, nullptr);
  } else {
    r = g_driver.launch(e.function, e.grid[0], e.grid[1], e.grid[2], e.block, 1, 1, e.shared,
                        stream, params, nullptr);
  }
  if (r != 0) {
    // Nothing ran. Forget this entry (the Python path records afresh or raises
    // through Triton, as the other variants do) and say why in last_error.
    const char* msg = "unknown error";
    g_driver.error_string(r, &msg);
    std::vector<int64_t> key;
    build_key(inputs, n, key);
    EntryMap evicted;
    EntryPtr old = put_entry(site, std::move(key), nullptr, evicted);
    throw std::runtime_error("launch of " + site.name + " failed: CUDA error " +
                             std::to_string(r) + " (" + msg + ")");
  }
  return wrap_outputs(site, outs, n_out);
}

// call(site, *inputs) -> output (or a tuple of its unbind(0) views, or a tuple of the
// site's n_outputs outputs), or None.
PyObject* call(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs < 1) {
    PyErr_SetString(PyExc_TypeError, "call(site, *inputs)");
    return nullptr;
  }
  Site* site = site_of(args[0]);
  if (site == nullptr) return nullptr;
  if (nargs - 1 != site->n_inputs) {
    PyErr_Format(PyExc_TypeError, "site %s takes %d inputs, got %zd", site->name.c_str(),
                 site->n_inputs, nargs - 1);
    return nullptr;
  }
  PyObject* result = nullptr;
  try {
    result = replay(*site, args + 1, nargs - 1);
  } catch (...) {
    note_error(*site, std::current_exception());
    result = Py_None;
  }
  if (result == Py_None || result == nullptr) {
    // A miss, or a failed Python API call: either way the Python path decides.
    PyErr_Clear();
    site->misses.fetch_add(1, std::memory_order_relaxed);
    Py_RETURN_NONE;
  }
  site->hits.fetch_add(1, std::memory_order_relaxed);
  return result;
}

// probe(site, *inputs) -> bool: would call() replay these inputs, given a driver (no
// launch; tests). Errors are misses, as in call().
PyObject* probe(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs < 1) {
    PyErr_SetString(PyExc_TypeError, "probe(site, *inputs)");
    return nullptr;
  }
  Site* site = site_of(args[0]);
  if (site == nullptr) return nullptr;
  if (nargs - 1 != site->n_inputs) Py_RETURN_FALSE;
  bool hit = false;
  try {
    hit = lookup(*site, args + 1, nargs - 1) != nullptr;
  } catch (...) {
    note_error(*site, std::current_exception());
  }
  PyErr_Clear();
  return PyBool_FromLong(hit);
}

// new_site(name, n_inputs, unbind[, n_outputs]) -> id
PyObject* new_site(PyObject*, PyObject* args) {
  return guarded([&]() -> PyObject* {
    const char* name;
    int n_inputs, unbind, n_outputs = 1;
    if (!PyArg_ParseTuple(args, "sip|i", &name, &n_inputs, &unbind, &n_outputs)) return nullptr;
    if (n_inputs < 1 || n_inputs > 16) {
      PyErr_Format(PyExc_ValueError, "n_inputs must be in [1, 16], got %d", n_inputs);
      return nullptr;
    }
    if (n_outputs < 1 || n_outputs > kMaxOutputs) {
      PyErr_Format(PyExc_ValueError, "n_outputs must be in [1, %d], got %d", kMaxOutputs,
                   n_outputs);
      return nullptr;
    }
    if (unbind && n_outputs > 1) {
      PyErr_Format(PyExc_ValueError,
                   "site %s: unbind returns one output's unbind(0) views; it cannot be "
                   "combined with n_outputs=%d",
                   name, n_outputs);
      return nullptr;
    }
    std::lock_guard<std::mutex> lock(g_new_site_mutex);
    const int id = g_n_sites.load(std::memory_order_relaxed);
    if (id >= kMaxSites) {
      PyErr_Format(PyExc_RuntimeError, "at most %d native sites per process", kMaxSites);
      return nullptr;
    }
    auto site = std::make_unique<Site>();
    site->name = name;
    site->n_inputs = n_inputs;
    site->n_outputs = n_outputs;
    site->unbind = unbind != 0;
    g_sites[static_cast<size_t>(id)].store(site.release(), std::memory_order_release);
    g_n_sites.store(id + 1, std::memory_order_release);
    return PyLong_FromLong(id);
  });
}

// configure(runtime_knobs, compilation_knobs): the objects the guards read. Once per
// process (at build), before any entry exists; the old objects stay referenced.
PyObject* configure(PyObject*, PyObject* args) {
  return guarded([&]() -> PyObject* {
    PyObject *runtime, *compilation;
    if (!PyArg_ParseTuple(args, "OO", &runtime, &compilation)) return nullptr;
    Py_INCREF(runtime);
    Py_INCREF(compilation);
    g_runtime_knobs = runtime;
    g_compilation_knobs = compilation;
    Py_RETURN_NONE;
  });
}

// record(site, inputs, out, function, context, device, grid, block, shared, args,
//        (kernel, device_key, cache_key, compiled, debug, instrumentation)[, pdl]) -> bool
// out: the output Tensor, or a tuple of the site's n_outputs Tensors where it has several;
// args: (kind, value) per kernel parameter, ARG_OUTPUT's value indexing out.
PyObject* record(PyObject*, PyObject* a) {
  return guarded([&]() -> PyObject* {
    PyObject *site_obj, *inputs, *out_obj, *grid, *arg_list, *triton;
    unsigned long long function, context;
    int device;
    unsigned block, shared;
    int pdl = 0;
    if (!PyArg_ParseTuple(a, "OO!OKKiOIIO!O!|p", &site_obj, &PyTuple_Type, &inputs, &out_obj,
                          &function, &context, &device, &grid, &block, &shared, &PyList_Type,
                          &arg_list, &PyTuple_Type, &triton, &pdl))
      return nullptr;
    Site* site = site_of(site_obj);
    if (site == nullptr) return nullptr;
    maybe_fault();
    if (PyTuple_GET_SIZE(inputs) != site->n_inputs) {
      PyErr_Format(PyExc_ValueError, "site %s records %d inputs, got %zd", site->name.c_str(),
                   site->n_inputs, PyTuple_GET_SIZE(inputs));
      return nullptr;
    }
    if (PyTuple_GET_SIZE(triton) != 6) {
      PyErr_SetString(PyExc_ValueError,
                      "triton must be (kernel, device_key, cache_key, compiled, debug, "
                      "instrumentation)");
      return nullptr;
    }
    PyObject* const* outs = &out_obj;
    Py_ssize_t n_out = 1;
    if (site->n_outputs == 1) {
      if (!THPVariable_Check(out_obj)) {
        PyErr_SetString(PyExc_TypeError, "out must be a Tensor");
        return nullptr;
      }
    } else {
      if (!PyTuple_Check(out_obj)) {
        PyErr_Format(PyExc_TypeError, "site %s has %d outputs: out must be a tuple of Tensors",
                     site->name.c_str(), site->n_outputs);
        return nullptr;
      }
      n_out = PyTuple_GET_SIZE(out_obj);
      if (n_out != site->n_outputs) {
        PyErr_Format(PyExc_ValueError, "site %s records %d outputs, got %zd",
                     site->name.c_str(), site->n_outputs, n_out);
        return nullptr;
      }
      outs = &PyTuple_GET_ITEM(out_obj, 0);
      for (Py_ssize_t j = 0; j < n_out; ++j) {
        if (!THPVariable_Check(outs[j])) {
          PyErr_SetString(PyExc_TypeError, "out must be a tuple of Tensors");
          return nullptr;
        }
      }
    }
    std::vector<int64_t> key;
    if (!plain_context() || !build_key(&PyTuple_GET_ITEM(inputs, 0), site->n_inputs, key))
      Py_RETURN_FALSE;
    for (Py_ssize_t j = 0; j < n_out; ++j) {
      if (!replayable(outs[j])) Py_RETURN_FALSE;
      const at::Tensor& out = THPVariable_Unpack(outs[j]);
      if (!out.is_contiguous() || out.dim() < (site->unbind ? 1 : 0)) Py_RETURN_FALSE;
      // The replay gives each output its own allocation: outputs that share memory are
      // not a launch it can repeat.
      for (Py_ssize_t k = 0; k < j; ++k)
        if (out.is_alias_of(THPVariable_Unpack(outs[k]))) Py_RETURN_FALSE;
    }
    // A PDL launch replayed without its attribute would still be right (the kernel's
    // wait is a no-op then) but not the launch the Python path makes: not recorded.
    if (pdl && (!driver_ready() || g_driver.launch_ex == nullptr)) Py_RETURN_FALSE;
    auto e = std::make_shared<Entry>();
    e->pdl = pdl != 0;
    e->function = reinterpret_cast<CUfunction>(function);
    e->context = reinterpret_cast<CUcontext>(context);
    e->device = device;
    if (!PyArg_ParseTuple(grid, "III", &e->grid[0], &e->grid[1], &e->grid[2])) return nullptr;
    e->block = block;
    e->shared = shared;
    const Py_ssize_t n_args = PyList_GET_SIZE(arg_list);
    if (n_args > 64) Py_RETURN_FALSE;
    for (Py_ssize_t i = 0; i < n_args; ++i) {
      Arg arg;
      long long value;
      if (!PyArg_ParseTuple(PyList_GET_ITEM(arg_list, i), "iL", &arg.kind, &value))
        return nullptr;
      arg.value = value;
      if (arg.kind < ARG_INPUT || arg.kind > ARG_I64 ||
          (arg.kind == ARG_INPUT && (value < 0 || value >= site->n_inputs)) ||
          (arg.kind == ARG_OUTPUT && (value < 0 || value >= site->n_outputs))) {
        PyErr_Format(PyExc_ValueError, "bad argument spec (%d, %lld)", arg.kind, value);
        return nullptr;
      }
      e->args.push_back(arg);
    }
    e->outputs.resize(static_cast<size_t>(n_out));
    for (Py_ssize_t j = 0; j < n_out; ++j) {
      const at::Tensor& out = THPVariable_Unpack(outs[j]);
      Output& o = e->outputs[static_cast<size_t>(j)];
      o.sizes = out.sizes().vec();
      o.dtype = out.scalar_type();
      o.device = out.device();
      o.align =
          static_cast<int64_t>(reinterpret_cast<uintptr_t>(out.const_data_ptr()) % kAlignKey);
    }
    e->kernel.reset(PyTuple_GET_ITEM(triton, 0));
    e->device_key.reset(PyTuple_GET_ITEM(triton, 1));
    e->cache_key.reset(PyTuple_GET_ITEM(triton, 2));
    e->compiled.reset(PyTuple_GET_ITEM(triton, 3));
    e->debug.reset(PyTuple_GET_ITEM(triton, 4));
    e->instrumentation.reset(PyTuple_GET_ITEM(triton, 5));
    EntryMap evicted;  // destroyed after put_entry unlocks
    EntryPtr old = put_entry(*site, std::move(key), std::move(e), evicted);
    Py_RETURN_TRUE;
  });
}

// stats(site) -> (entries, hits, misses)
PyObject* stats(PyObject*, PyObject* obj) {
  return guarded([&]() -> PyObject* {
    Site* site = site_of(obj);
    if (site == nullptr) return nullptr;
    size_t entries;
    {
      std::lock_guard<std::mutex> lock(site->mutex);
      entries = site->entries.size();
    }
    return Py_BuildValue("(nKK)", static_cast<Py_ssize_t>(entries),
                         static_cast<unsigned long long>(site->hits.load()),
                         static_cast<unsigned long long>(site->misses.load()));
  });
}

// last_error(site) -> str or None: the last C++ exception or failed launch that a call
// or probe of this site turned into a miss.
PyObject* last_error(PyObject*, PyObject* obj) {
  return guarded([&]() -> PyObject* {
    Site* site = site_of(obj);
    if (site == nullptr) return nullptr;
    std::string msg;
    {
      std::lock_guard<std::mutex> lock(site->mutex);
      msg = site->last_error;
    }
    if (msg.empty()) Py_RETURN_NONE;
    return PyUnicode_FromStringAndSize(msg.data(), static_cast<Py_ssize_t>(msg.size()));
  });
}

PyObject* clear(PyObject*, PyObject* obj) {
  return guarded([&]() -> PyObject* {
    Site* site = site_of(obj);
    if (site == nullptr) return nullptr;
    EntryMap evicted;  // destroyed after the lock is released
    {
      std::lock_guard<std::mutex> lock(site->mutex);
      evicted.swap(site->entries);
      site->last_error.clear();
    }
    site->hits = 0;
    site->misses = 0;
    Py_RETURN_NONE;
  });
}

// current_context() -> int: the calling thread's CUcontext (0 if none or no driver).
PyObject* current_context(PyObject*, PyObject*) {
  return guarded([&]() -> PyObject* {
    CUcontext ctx = nullptr;
    if (driver_ready()) g_driver.ctx_current(&ctx);
    return PyLong_FromUnsignedLongLong(reinterpret_cast<uintptr_t>(ctx));
  });
}

// driver_error() -> str: why launches cannot be made here ("" if they can).
PyObject* driver_error(PyObject*, PyObject*) {
  return guarded([&]() -> PyObject* {
    driver_ready();
    return PyUnicode_FromString(g_driver.error.c_str());
  });
}

// inject_fault(kind): the next call/probe/record throws inside its try block
// (1: c10::Error, 2: std::runtime_error, 3: an int; 0: none). Tests only.
PyObject* inject_fault(PyObject*, PyObject* obj) {
  return guarded([&]() -> PyObject* {
    long kind = PyLong_AsLong(obj);
    if (kind == -1 && PyErr_Occurred()) return nullptr;
    if (kind < FAULT_NONE || kind > FAULT_OTHER) {
      PyErr_Format(PyExc_ValueError, "fault kind must be in [0, 3], got %ld", kind);
      return nullptr;
    }
    g_fault.store(static_cast<int>(kind));
    Py_RETURN_NONE;
  });
}

// --- the shape recorder's counter (ltx2k/workload/record.py) ----------------------------
//
// Why here: a recording counts every call of the public functions, and keying one call
// from Python (twelve tensor attribute reads, a tuple of tuples, its hash) cost more than
// the kernel call's own host path on the H200. In C it is one call: the key is the
// tensors' metadata packed into one bytes object, cheap to build and to hash.

// Tensors whose sizes and strides are the caller's own view (not a functorch wrapper's
// physical layout, not a Python subclass's) and can be read without throwing. Storage
// and device do not matter: a meta tensor's signature is recorded too.
bool recordable(PyObject* obj) {
  if (!plain_type(obj)) return false;
  const at::Tensor& t = THPVariable_Unpack(obj);
  if (!t.defined()) return false;
  const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  if (impl->key_set().has_any(kNotReplayable) || impl->is_python_dispatch()) return false;
  return impl->layout() == c10::kStrided && !impl->is_nested() &&
         !impl->has_symbolic_sizes_strides();
}

// Adds n to key's count in every recording's `_counts` dict. The read and the write are
// one step for other threads: nothing between them can run Python code (bytes and tuple
// keys hash and compare in C) or release the GIL; without a GIL, the dict's own
// critical section makes them one.
bool add_to_counts(PyObject* recordings, PyObject* key, long long n) {
  const Py_ssize_t m = PyTuple_GET_SIZE(recordings);
  for (Py_ssize_t i = 0; i < m; ++i) {
    PyObject* counts = PyObject_GetAttr(PyTuple_GET_ITEM(recordings, i), s_counts);
    if (counts == nullptr) return false;
    if (!PyDict_CheckExact(counts)) {
      Py_DECREF(counts);
      PyErr_SetString(PyExc_TypeError, "a recording's _counts must be a dict");
      return false;
    }
    bool ok = false;
#ifdef Py_GIL_DISABLED
    Py_BEGIN_CRITICAL_SECTION(counts);
#endif
    PyObject* old = PyDict_GetItemWithError(counts, key);  // borrowed
    long long before = 0;
    if (old != nullptr) before = PyLong_AsLongLong(old);
    if (!PyErr_Occurred()) {
      PyObject* now = PyLong_FromLongLong(before + n);
      ok = now != nullptr && PyDict_SetItem(counts, key, now) == 0;
      Py_XDECREF(now);
    }
#ifdef Py_GIL_DISABLED
    Py_END_CRITICAL_SECTION();
#endif
    Py_DECREF(counts);
    if (!ok) return false;
  }
  return true;
}

PyObject* tuple_arg(PyObject* obj) {
  if (!PyTuple_CheckExact(obj)) {
    PyErr_SetString(PyExc_TypeError, "recordings must be a tuple");
    return nullptr;
  }
  return obj;
}

// shape_count(recordings, kernel_id, *tensors) -> bool: count the call's signature in
// every recording; False (nothing counted) where a tensor is not recordable(). The key:
// kernel_id, then per tensor dim, sizes, strides, scalar type, storage offset (int64s;
// record.py decodes it).
PyObject* shape_count(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  return guarded([&]() -> PyObject* {
    if (nargs < 2) {
      PyErr_SetString(PyExc_TypeError, "shape_count(recordings, kernel_id, *tensors)");
      return nullptr;
    }
    PyObject* recordings = tuple_arg(args[0]);
    if (recordings == nullptr) return nullptr;
    const long long kernel = PyLong_AsLongLong(args[1]);
    if (kernel == -1 && PyErr_Occurred()) return nullptr;
    int64_t key[1 + 8 * 20];  // up to 8 tensors of up to 8 dims: the functions take 2 or 3
    size_t n = 0;
    key[n++] = kernel;
    if (nargs - 2 > 8) Py_RETURN_FALSE;
    for (Py_ssize_t i = 2; i < nargs; ++i) {
      if (!recordable(args[i])) Py_RETURN_FALSE;
      const at::Tensor& t = THPVariable_Unpack(args[i]);
      const int64_t dim = t.dim();
      if (dim > 8) Py_RETURN_FALSE;
      key[n++] = dim;
      for (int64_t d = 0; d < dim; ++d) key[n++] = t.sizes()[d];
      for (int64_t d = 0; d < dim; ++d) key[n++] = t.strides()[d];
      key[n++] = static_cast<int64_t>(t.scalar_type());
      key[n++] = t.storage_offset();
    }
    PyObject* bytes =
        PyBytes_FromStringAndSize(reinterpret_cast<const char*>(key), n * sizeof(int64_t));
    if (bytes == nullptr) return nullptr;
    const bool ok = add_to_counts(recordings, bytes, 1);
    Py_DECREF(bytes);
    if (!ok) return nullptr;
    Py_RETURN_TRUE;
  });
}

// shape_add(recordings, key, n): add n to any key's count (the Python path's keys, and
// counts put back after a failed write), as atomically as shape_count.
PyObject* shape_add(PyObject*, PyObject* args) {
  return guarded([&]() -> PyObject* {
    PyObject *recordings, *key;
    long long n;
    if (!PyArg_ParseTuple(args, "O!OL", &PyTuple_Type, &recordings, &key, &n)) return nullptr;
    if (!add_to_counts(recordings, key, n)) return nullptr;
    Py_RETURN_NONE;
  });
}

// scalar_type_dtype(code) -> torch.dtype of a c10::ScalarType code in a shape_count key.
PyObject* scalar_type_dtype(PyObject*, PyObject* obj) {
  return guarded([&]() -> PyObject* {
    const long code = PyLong_AsLong(obj);
    if (code == -1 && PyErr_Occurred()) return nullptr;
    if (code < 0 || code >= static_cast<long>(c10::ScalarType::NumOptions)) {
      PyErr_Format(PyExc_ValueError, "not a scalar type code: %ld", code);
      return nullptr;
    }
    PyObject* dtype =
        reinterpret_cast<PyObject*>(torch::getTHPDtype(static_cast<c10::ScalarType>(code)));
    Py_XINCREF(dtype);
    return dtype;
  });
}

PyMethodDef methods[] = {
    {"shape_count", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(shape_count)),
     METH_FASTCALL, "shape_count(recordings, kernel_id, *tensors) -> bool"},
    {"shape_add", shape_add, METH_VARARGS, "shape_add(recordings, key, n)"},
    {"scalar_type_dtype", scalar_type_dtype, METH_O, "the torch.dtype of a scalar type code"},
    {"call", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(call)), METH_FASTCALL,
     "call(site, *inputs) -> output, tuple of outputs, or None"},
    {"probe", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(probe)), METH_FASTCALL,
     "probe(site, *inputs) -> bool"},
    {"new_site", new_site, METH_VARARGS, "new_site(name, n_inputs, unbind[, n_outputs]) -> id"},
    {"configure", configure, METH_VARARGS, "configure(runtime_knobs, compilation_knobs)"},
    {"record", record, METH_VARARGS, "record a launch the Python path made"},
    {"stats", stats, METH_O, "stats(site) -> (entries, hits, misses)"},
    {"last_error", last_error, METH_O, "last_error(site) -> str or None"},
    {"clear", clear, METH_O, "clear(site)"},
    {"current_context", current_context, METH_NOARGS, "the calling thread's CUcontext"},
    {"driver_error", driver_error, METH_NOARGS, "why native launches are unavailable"},
    {"inject_fault", inject_fault, METH_O, "make the next call/probe/record throw (tests)"},
    {nullptr, nullptr, 0, nullptr}};

// The build names the module after a hash of this source (TORCH_EXTENSION_NAME),
// so the builds of two commits never overwrite each other.
#define LTX2K_STR2(x) #x
#define LTX2K_STR(x) LTX2K_STR2(x)
#define LTX2K_CAT2(a, b) a##b
#define LTX2K_CAT(a, b) LTX2K_CAT2(a, b)

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, LTX2K_STR(TORCH_EXTENSION_NAME), nullptr, -1,
                          methods};

}  // namespace

PyMODINIT_FUNC LTX2K_CAT(PyInit_, TORCH_EXTENSION_NAME)() {
  s_enter = PyUnicode_InternFromString("launch_enter_hook");
  s_exit = PyUnicode_InternFromString("launch_exit_hook");
  s_calls = PyUnicode_InternFromString("calls");
  s_debug = PyUnicode_InternFromString("debug");
  s_instrumentation = PyUnicode_InternFromString("instrumentation_mode");
  s_pre_run_hooks = PyUnicode_InternFromString("pre_run_hooks");
  s_device_caches = PyUnicode_InternFromString("device_caches");
  s_counts = PyUnicode_InternFromString("_counts");
  // torch is imported (this module is built and loaded by it): Parameter's class is there.
  PyObject* parameter_module = PyImport_ImportModule("torch.nn.parameter");
  if (parameter_module == nullptr) return nullptr;
  PyObject* parameter = PyObject_GetAttrString(parameter_module, "Parameter");
  Py_DECREF(parameter_module);
  if (parameter == nullptr) return nullptr;
  if (!PyType_Check(parameter)) {
    Py_DECREF(parameter);
    PyErr_SetString(PyExc_TypeError, "torch.nn.parameter.Parameter is not a type");
    return nullptr;
  }
  s_parameter_type = reinterpret_cast<PyTypeObject*>(parameter);  // kept for the process
  return PyModule_Create(&module_def);
}
