"""Readable kernel names and categories.

Everything here is vectorised over pandas Series (the trace can hold a million rows): each DISTINCT
name is demangled, shortened and classified once. Scalar twins serve importers and tests.

- `demangle` (`demangling`): Itanium-mangled names (`_ZN7cutlass13device_kernel...`, what CUPTI
  reports for kernels launched through the driver API) become C++ names with LLVM's demangler
  (pycxxfilt). `rooftop.trace.to_table` applies it to every row, so every importer stores demangled names.
- `short_name` (`display`): a display name (`vectorized_elementwise_kernel<>`); `short_names` then
  makes the names of one trace unique: kernels that would share a display name get the template
  argument or text that tells them apart (`vectorized_elementwise_kernel<…CUDAFunctor_add<int>…>`).
- `category_of` (`categories`): the category from the kernel's own name (its parameter list is never
  read: a GEMM's parameter types can name an attention struct, a copy kernel's a softmax functor).
- `cxx`: the structure of a C++ name (brackets, parameters, templates) both of them read.

The phase/step/layer an NVTX path carries is `rooftop.trace.steps` (`parse_path`, `parse_paths`).
"""
from rooftop.trace.names.categories import CATEGORIES, SCAN_CHARS, categorize, category_of, gpu_work_counts
from rooftop.trace.names.demangling import demangle, demangle_all
from rooftop.trace.names.display import SHORT_LIMIT, fit, short_name, short_names, unique_short_names, whole_names, with_whole_names

__all__ = [
    "CATEGORIES", "SCAN_CHARS", "SHORT_LIMIT", "categorize", "category_of", "demangle", "demangle_all", "fit",
    "gpu_work_counts", "short_name", "short_names", "unique_short_names", "whole_names", "with_whole_names",
]
