"""The one registry of task families: built-ins, plug-ins found by entry point, and data-defined domains.

Everything that turns a domain name into behaviour reads it: the simulator (prompts, validation), the verifier
(checkers), the benchmarks (evaluators), experiments, the orchestrator and the CLI.

- **Built-ins** are a table of family folders (``genenv.domains.<family>``: ``domain.py``, ``checker.py``,
  ``benchmark.py``), imported on first use so each process loads only what it needs.
- **Plug-ins** are entry points of the ``genenv.domains`` group, ``name = "package.module:OBJECT"``, where OBJECT
  is a :class:`~genenv.domains.base.Domain` instance, a Domain subclass or a factory returning one. A plug-in that
  fails to import or violates the interface is listed as failed with its reason; it never hides the others.
- **Data-defined** domains are built from a user's seed file (:mod:`genenv.domains.data`); their seed files live
  in the database, so the registry only builds them from a spec it is handed (:meth:`DomainRegistry.data_domain`).
  Their task payloads name their kind, so a process without the database (the verifier) can still score them.

Pure code: imports neither the database nor clients nor services.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import json
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from genenv.contracts.domains import DOMAIN_NAME_PATTERN
from genenv.domains.base import Domain

ENTRY_POINT_GROUP = "genenv.domains"
NAME_PATTERN = DOMAIN_NAME_PATTERN
"""Domain names: lower-case identifiers (they appear in URLs, config files and adapter names)."""
_NAME = re.compile(NAME_PATTERN)

Source = Literal["builtin", "plugin", "data"]


@dataclass(frozen=True)
class Family:
    """A built-in task family: its folder (a package holding ``domain.py`` with ``DOMAIN`` and ``benchmark.py``
    with ``EVALUATOR``) and the name of its benchmark."""

    domain: str
    package: str
    benchmark: str

    @property
    def domain_module(self) -> str:
        """The module defining the family's ``DOMAIN``."""
        return f"{self.package}.domain"

    @property
    def benchmark_module(self) -> str:
        """The module defining the family's benchmark ``EVALUATOR``."""
        return f"{self.package}.benchmark"


BUILTIN_FAMILIES: tuple[Family, ...] = (
    Family("arithmetic", "genenv.domains.arithmetic", "arithmetic"),
    Family("function_calling", "genenv.domains.function_calling", "bfcl"),
    Family("api_bank", "genenv.domains.api_bank", "api_bank"),
    Family("qa", "genenv.domains.qa", "bamboogle"),
    Family("alfworld_step", "genenv.domains.alfworld_step", "alfworld"),
    Family("travel_plan", "genenv.domains.travel_plan", "travelplanner"),
)


class UnknownDomainError(KeyError):
    """No domain of that name (or a plug-in of that name that failed to load: the message says why)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class UnavailableDomainError(UnknownDomainError):
    """A plug-in of that name that failed to load (the message says why): no other store is searched."""


class PluginError(Exception):
    """A plug-in that does not satisfy the Domain interface."""


@dataclass(frozen=True)
class DomainEntry:
    """One line of ``genenv domains list``: where a domain comes from and whether it loads."""

    name: str
    source: Source
    origin: str
    ok: bool = True
    reason: str | None = None
    kind: str | None = None


def check_interface(domain: object, name: str) -> Domain:
    """``domain`` as a Domain whose name is ``name`` and whose pure methods answer, or PluginError saying why."""
    if isinstance(domain, type) and issubclass(domain, Domain):
        cls = domain
        try:
            domain = cls()
        except TypeError as exc:  # abstract methods left unimplemented, or a constructor needing arguments
            raise PluginError(f"cannot instantiate {cls.__name__}: {exc}") from None
    elif callable(domain) and not isinstance(domain, Domain):
        domain = domain()
    if not isinstance(domain, Domain):
        raise PluginError(f"the entry point gives {type(domain).__name__}, not a genenv.domains.base.Domain")
    if getattr(domain, "name", None) != name:
        raise PluginError(f"the entry point is named {name!r} but the domain calls itself {domain.name!r}")
    schema = domain.task_json_schema()
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise PluginError("task_json_schema() must return a JSON schema of an object")
    if not 0.0 <= float(domain.default_success_threshold) <= 1.0:
        raise PluginError("default_success_threshold must lie in [0, 1]")
    return domain


class DomainRegistry:
    """Built-ins, discovered plug-ins and data-defined domains behind one lookup."""

    def __init__(
        self,
        families: Iterable[Family] = BUILTIN_FAMILIES,
        *,
        entry_points: Callable[[], Iterable[importlib.metadata.EntryPoint]] | None = None,
    ) -> None:
        self._families = {f.domain: f for f in families}
        self._entry_points = entry_points or (lambda: importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))
        self._lock = threading.Lock()
        self._plugins: dict[str, Domain] | None = None
        self._plugin_entries: list[DomainEntry] = []
        self._data: dict[tuple[str, str], Domain] = {}

    # --- built-ins and plug-ins ---------------------------------------------------------------------------------

    def _discover(self) -> dict[str, Domain]:
        """Load every plug-in once per process; each failure is confined to its own entry."""
        with self._lock:
            if self._plugins is not None:
                return self._plugins
            plugins: dict[str, Domain] = {}
            entries: list[DomainEntry] = []
            try:
                found = list(self._entry_points())
            except Exception as exc:  # broken package metadata must not take the built-ins down
                found = []
                entries.append(DomainEntry("?", "plugin", ENTRY_POINT_GROUP, ok=False,
                                           reason=f"entry points unreadable: {exc!r}"))
            for ep in sorted(found, key=lambda e: e.name):
                reason: str | None = None
                if ep.name in self._families:
                    reason = f"the name {ep.name!r} is a built-in domain's; rename the entry point"
                elif not _NAME.match(ep.name):
                    reason = f"the name {ep.name!r} does not match {NAME_PATTERN}"
                elif ep.name in plugins:
                    reason = f"two entry points are named {ep.name!r}"
                else:
                    try:
                        plugins[ep.name] = check_interface(ep.load(), ep.name)
                    except PluginError as exc:
                        reason = f"violates the domain interface: {exc}"
                    except Exception as exc:  # an import error, or the plug-in's own code failing
                        reason = f"failed to load: {type(exc).__name__}: {exc}"
                entries.append(DomainEntry(ep.name, "plugin", ep.value, ok=reason is None, reason=reason))
            self._plugins, self._plugin_entries = plugins, entries
            return plugins

    def refresh(self) -> None:
        """Forget discovered plug-ins (the next lookup scans the entry points again)."""
        with self._lock:
            self._plugins = None
            self._plugin_entries = []

    def names(self) -> list[str]:
        """Names of the built-in and working plug-in domains."""
        return sorted([*self._families, *self._discover()])

    def is_static(self, name: str) -> bool:
        """Whether ``name`` is a built-in or a working plug-in (data-defined domains live in the database)."""
        return name in self._families or name in self._discover()

    def entries(self) -> list[DomainEntry]:
        """Built-ins and plug-ins, failed plug-ins included with their reason."""
        self._discover()
        builtins = [DomainEntry(f.domain, "builtin", f.package) for f in self._families.values()]
        return sorted([*builtins, *self._plugin_entries], key=lambda e: (e.source != "builtin", e.name))

    def get(self, name: str) -> Domain:
        """The built-in or plug-in domain called ``name``, or UnknownDomainError (naming a plug-in's failure)."""
        family = self._families.get(name)
        if family is not None:
            domain = importlib.import_module(family.domain_module).DOMAIN
            assert isinstance(domain, Domain)
            return domain
        plugins = self._discover()
        if name in plugins:
            return plugins[name]
        failed = next((e for e in self._plugin_entries if e.name == name and not e.ok), None)
        if failed is not None:
            raise UnavailableDomainError(f"domain plug-in {name!r} is unavailable: {failed.reason}")
        raise UnknownDomainError(f"unknown domain {name!r}; choose from {self.names()} or a registered one")

    def family(self, name: str) -> Family | None:
        """The built-in family called ``name`` (its benchmark), or None."""
        return self._families.get(name)

    def benchmark_modules(self) -> dict[str, str]:
        """Benchmark name → evaluator module of the built-in families."""
        return {f.benchmark: f.benchmark_module for f in self._families.values()}

    # --- data-defined domains -----------------------------------------------------------------------------------

    def data_domain(self, name: str, kind: str, content: str, options: dict[str, Any] | None = None) -> Domain:
        """The data-defined domain built from a stored seed file (built once per content)."""
        from genenv.domains.data.domain import build_data_domain

        key = (name, _content_key(kind, content, options))
        with self._lock:
            hit = self._data.get(key)
        if hit is not None:
            return hit
        domain = build_data_domain(name, kind, content, options or {})
        with self._lock:
            if len(self._data) >= 64:
                self._data.clear()
            self._data[key] = domain
        return domain

    def for_task(self, name: str, payload: dict[str, Any]) -> Domain:
        """The domain to prompt for or score one task: by name, else by the kind a data-defined payload names
        (processes without the database, such as the verifier, score data-defined tasks this way)."""
        try:
            return self.get(name)
        except UnknownDomainError:
            from genenv.domains.data.domain import DATA_KIND_FIELD, kind_domain

            kind = payload.get(DATA_KIND_FIELD)
            if isinstance(kind, str):
                found = kind_domain(name, kind, payload)
                if found is not None:
                    return found
            raise


def _content_key(kind: str, content: str, options: dict[str, Any] | None) -> str:
    blob = json.dumps([kind, options or {}, content], sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()


REGISTRY = DomainRegistry()
"""The process-wide registry."""
