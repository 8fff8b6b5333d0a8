"""cuda_library: compiles .cu files with nvcc and yields a normal cc_library.

    cuda_library(
        name = "kernels",
        srcs = ["add_kernels.cu"],   # compiled by nvcc
        hdrs = ["add_kernels.h"],    # plain C++ headers for the callers
        deps = [...],                # cc_library deps whose headers the .cu include
    )

Every CUDA target is compatible only with --config=cuda: a CPU-only build
skips it and never needs a CUDA header.
"""

NVCC = "/usr/local/cuda/bin/nvcc"

# Hopper (H100, H200) and Ampere, plus PTX for newer GPUs.
GENCODE = [
    "-gencode=arch=compute_80,code=sm_80",
    "-gencode=arch=compute_90,code=sm_90",
    "-gencode=arch=compute_90,code=compute_90",
]

CUDA_ONLY = select({
    "//third_party/cuda:enabled": [],
    "//conditions:default": ["//third_party/cuda:unavailable"],
})

def _nvcc_objects_impl(ctx):
    cc_infos = [dep[CcInfo] for dep in ctx.attr.deps if CcInfo in dep]
    context = cc_common.merge_cc_infos(cc_infos = cc_infos).compilation_context
    args = []
    for path in context.includes.to_list() + context.quote_includes.to_list():
        args.append("-I" + path)
    for path in context.system_includes.to_list():
        args.append("-isystem=" + path)
    for define in context.defines.to_list():
        args.append("-D" + define)
    inputs = depset(ctx.files.srcs + ctx.files.hdrs, transitive = [context.headers])
    objects = []
    for src in ctx.files.srcs:
        obj = ctx.actions.declare_file("_objs/%s/%s.o" % (ctx.label.name, src.basename))
        ctx.actions.run(
            executable = NVCC,
            arguments = ["-c", src.path, "-o", obj.path, "-I.", "-std=c++17", "-O3",
                         "--compiler-options", "-fPIC", "-Xcudafe", "--diag_suppress=esa_on_defaulted_function_ignored"] +
                        GENCODE + args + ctx.attr.copts,
            inputs = inputs,
            outputs = [obj],
            mnemonic = "Nvcc",
            progress_message = "Compiling CUDA %s" % src.short_path,
            use_default_shell_env = True,
        )
        objects.append(obj)
    return [DefaultInfo(files = depset(objects))]

_nvcc_objects = rule(
    implementation = _nvcc_objects_impl,
    attrs = {
        "srcs": attr.label_list(allow_files = [".cu"]),
        "hdrs": attr.label_list(allow_files = True),
        "deps": attr.label_list(providers = [CcInfo]),
        "copts": attr.string_list(),
    },
)

def cuda_library(name, srcs = [], hdrs = [], deps = [], copts = [], cc_srcs = [], **kwargs):
    """A cc_library whose .cu sources nvcc compiles (cc_srcs: plain C++ files)."""
    _nvcc_objects(
        name = name + "_nvcc",
        srcs = srcs,
        hdrs = hdrs,
        deps = deps + ["@cuda//:headers"],
        copts = copts,
        target_compatible_with = CUDA_ONLY,
        tags = ["cuda"],
    )
    native.cc_library(
        name = name,
        srcs = [":" + name + "_nvcc"] + cc_srcs,
        hdrs = hdrs,
        deps = deps + ["@cuda//:cudart"],
        target_compatible_with = CUDA_ONLY,
        tags = kwargs.pop("tags", []) + ["cuda"],
        **kwargs
    )
