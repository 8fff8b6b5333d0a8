"""Who may depend on framework/'s concerns.

memory/ may see only the plain-data layers (base, device, schedule): it
knows a network through the step schedule and NetworkView, never a Net,
its layers or the YAML format.
"""

# base, device and schedule: every part of spill.
EVERYWHERE = [
    "//data:__subpackages__",
    "//framework:__subpackages__",
    "//layers:__subpackages__",
    "//memory:__subpackages__",
    "//tests:__subpackages__",
    "//tools:__subpackages__",
]

# config, graph, io and solver: every part but memory/.
NOT_MEMORY = [
    "//data:__subpackages__",
    "//framework:__subpackages__",
    "//layers:__subpackages__",
    "//tests:__subpackages__",
    "//tools:__subpackages__",
]
