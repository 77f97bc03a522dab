"""The one registration point through which the floor above plugs into ``ingest``.

``ingest`` knows nothing of :mod:`analytics`: the analyses, the validation, the run report and
the experiments reach the command line, the pipeline and the curated collections as a *plugin*,
a module named by an entry point of the group ``sci_ingest.plugins`` (``pyproject.toml``)::

    [project.entry-points."sci_ingest.plugins"]
    analytics = "analytics.plugin"

A plugin module may define:

``STEPS``
    ``{name: "module:function"}``: pipeline steps after ``load``, in order, imported when first
    run; a step is called as
    ``step(conn, timings, settings, *, cluster=..., **options)`` (see :mod:`ingest.pipeline`).
``register_commands(add, common)``
    adds its commands to ``sci-ingest`` (``add`` as :func:`ingest.cli.main.build_parser` gives it);
    a command of ``ingest``'s own loads no plugin (``importlib.metadata`` alone costs 40-140 ms
    of a cold start).
``curated_outputs()``
    the curated collections that its outputs are (:class:`ingest.store.curated.Curated`).
``WARM_UPS``
    ``{purpose: ("module:function", here)}``: for a step's purpose, a module-level function every Dask
    worker runs once before the step's first task (its imports), and whether the calling process
    runs it too (:func:`ingest.cluster.warm_up`).
``NEEDS``
    ``{command: (need, ...)}``: what each of its commands does on the server (actions and features of
    :mod:`ingest.store.capabilities`), which ``sci-ingest check`` asks for.
``CHECKS``
    ``("module:function", ...)``: more of ``sci-ingest check``'s rows, each function called as
    ``function(uri, db, scratch)`` (:func:`ingest.store.capabilities.server_rows`).

An installed project has its plugins (``make install`` installs it); a checkout that is not
installed has none, and what needs one says so (:class:`PluginMissing`).
"""

from __future__ import annotations

import functools
import importlib

from ingest.errors import ConfigError

GROUP = "sci_ingest.plugins"
DISTRIBUTION = "sci-ingest"


class PluginMissing(ConfigError):
    """No installed plugin provides what was asked for."""


@functools.cache
def plugins() -> tuple:
    """The plugin modules registered by the installed distribution, in the order of their names."""
    from importlib import metadata  # noqa: PLC0415 - lazy: parse --help reads ingest.plugins; importlib.metadata costs 46 ms

    try:
        found = metadata.distribution(DISTRIBUTION).entry_points.select(group=GROUP)
    except metadata.PackageNotFoundError:
        return ()
    return tuple(importlib.import_module(ep.value.partition(":")[0]) for ep in sorted(found, key=lambda e: e.name))


def resolve(target: str):
    """The function a plugin names as ``"module:function"``."""
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)


def steps() -> dict[str, str]:
    """Every plugin's pipeline steps, ``{name: "module:function"}``, in order."""
    found: dict[str, str] = {}
    for plugin in plugins():
        found.update(getattr(plugin, "STEPS", {}))
    return found


def preloads() -> list[str]:
    """Every plugin's ``PRELOADS``: modules its steps import only when they run, slow to import."""
    return [name for plugin in plugins() for name in getattr(plugin, "PRELOADS", ())]


def step(name: str):
    """The step called ``name``; :class:`PluginMissing` if no plugin provides it."""
    found = steps().get(name)
    if found is None:
        raise PluginMissing(f"no installed plugin provides the {name!r} step; install the project "
                            f"(`make install`, or `pip install -e .`) so its {GROUP!r} entry points are found")
    return resolve(found)


def register_commands(add, common) -> None:
    for plugin in plugins():
        register = getattr(plugin, "register_commands", None)
        if register is not None:
            register(add, common)


def curated_outputs() -> list:
    found = []
    for plugin in plugins():
        outputs = getattr(plugin, "curated_outputs", None)
        if outputs is not None:
            found.extend(outputs())
    return found


def needs() -> dict[str, tuple[str, ...]]:
    """Every plugin's ``NEEDS``: what its commands do on the server."""
    found: dict[str, tuple[str, ...]] = {}
    for plugin in plugins():
        found.update(getattr(plugin, "NEEDS", {}))
    return found


def checks() -> list:
    """Every plugin's ``CHECKS``, resolved: the functions that add rows to ``sci-ingest check``."""
    return [resolve(target) for plugin in plugins() for target in getattr(plugin, "CHECKS", ())]


def warm_up(purpose: str):
    """``(prepare, here)`` for ``purpose`` from the plugin that names it, or None."""
    for plugin in plugins():
        found = getattr(plugin, "WARM_UPS", {}).get(purpose)
        if found is not None:
            return resolve(found[0]), found[1]
    return None
