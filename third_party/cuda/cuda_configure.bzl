"""A repository for the CUDA toolkit at /usr/local/cuda (or $CUDA_PATH).

Where no toolkit is installed, the repository holds empty stand-ins, so that
CPU-only builds load every package without one (CUDA targets are skipped
there anyway).
"""

def _cuda_configure_impl(ctx):
    path = ctx.os.environ.get("CUDA_PATH", "/usr/local/cuda")
    if ctx.path(path + "/include/cuda_runtime.h").exists:
        for entry in ["include", "lib64", "bin"]:
            ctx.symlink(path + "/" + entry, entry)
        ctx.symlink(ctx.attr.build_file, "BUILD")
        return
    ctx.file("BUILD", "\n".join([
        "package(default_visibility = ['//visibility:public'])",
        "# No CUDA toolkit found at %s." % path,
        "cc_library(name = 'headers')",
        "cc_library(name = 'cudart')",
        "cc_library(name = 'cublas')",
        "cc_library(name = 'cudnn')",
    ]))

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    attrs = {"build_file": attr.label()},
    environ = ["CUDA_PATH"],
    local = True,
)
