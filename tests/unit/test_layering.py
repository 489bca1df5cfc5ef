"""The product's structure (docs/architecture.md): which folder may import which, no import
circle, no module over 600 lines. Imports are read with `ast`, at module level and inside
functions alike (a lazy import that hides a circle is still a circle); importing `a.b.c` also
runs the `__init__` of `a` and `a.b`, so those count too unless the importer is inside them."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("settings", "store", "tools", "graphs", "server")
# What each product folder may import of the others: each layer only those below it.
ALLOWED = {
    "settings": set(),
    "store": {"settings"},
    "tools": {"settings", "store"},
    "graphs": {"settings", "store", "tools"},
    "server": {"settings", "store", "tools", "graphs"},
}
MAX_LINES = 600


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def product_modules() -> dict[str, Path]:
    return {_module_name(path): path for folder in FOLDERS for path in sorted((ROOT / folder).rglob("*.py"))}


def import_edges(modules: dict[str, Path]) -> dict[str, dict[str, int]]:
    """importer -> {imported product module: line of the first import}."""

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, dict[str, int]] = {}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        found = edges.setdefault(module, {})
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, *([node.module] if node.module else [])])
                # `from pkg import sub` imports the submodule `pkg.sub` when there is one
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            else:
                continue
            for target in targets:
                imported = resolve(target)
                if imported is None or imported == module:
                    continue
                parts = imported.split(".")
                for i in range(1, len(parts) + 1):
                    name = ".".join(parts[:i])
                    inside = module == name or module.startswith(name + ".")
                    if name in modules and (name == imported or not inside):
                        found.setdefault(name, node.lineno)
    return edges


def circles(edges: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in edges.get(node, {}):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_each_folder_imports_only_the_layers_below_it():
    modules = product_modules()
    wrong = [
        f"{modules[importer].relative_to(ROOT)}:{line} imports {imported} ({importer.split('.')[0]}/ may import "
        f"{', '.join(sorted(ALLOWED[importer.split('.')[0]])) or 'nothing of the product'})"
        for importer, imported_lines in import_edges(modules).items()
        for imported, line in imported_lines.items()
        if imported.split(".")[0] != importer.split(".")[0]
        and imported.split(".")[0] not in ALLOWED[importer.split(".")[0]]
    ]
    assert not wrong, "Imports against the layering (docs/architecture.md):\n" + "\n".join(wrong)


def test_no_import_circle():
    edges = import_edges(product_modules())
    found = circles(edges)
    described = [
        " <-> ".join(component)
        + "\n"
        + "\n".join(
            f"    {importer}:{line} -> {imported}"
            for importer in component
            for imported, line in edges[importer].items()
            if imported in component
        )
        for component in found
    ]
    assert not found, "Import circles (move the code to its owner):\n" + "\n".join(described)


def test_no_product_module_over_600_lines():
    long = {
        str(path.relative_to(ROOT)): lines
        for path in product_modules().values()
        if (lines := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"Modules over {MAX_LINES} lines (split them by job): {long}"


def test_the_checks_see_a_circle_a_lazy_import_and_a_layer_crossing(tmp_path, monkeypatch):
    """The checks themselves: on a tiny tree with a circle hidden in a function and a store
    module importing the server, both are reported."""
    for name, text in {
        "store/__init__.py": "",
        "store/a.py": "from store import b\n",
        "store/b.py": "def f():\n    from store.a import x\n",
        "store/c.py": "import server.api\n",
        "server/__init__.py": "",
        "server/api.py": "from store.c import y\n",
    }.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    modules = {
        _module_name(path): path for folder in ("store", "server") for path in sorted((tmp_path / folder).rglob("*.py"))
    }
    edges = import_edges(modules)
    assert ["store.a", "store.b"] in circles(edges)
    assert ["server.api", "store.c"] in circles(edges)
    assert "server.api" in edges["store.c"] and "server" in edges["store.c"]


# Module-level state of graphs/ and store/ that is not a cache, and why it may stay.
MODULE_STATE = {
    "graphs/runtime/models.py:_PROVIDERS": "the registry of chat-model providers (`register_provider`)",
    "graphs/runtime/memory_schedule.py:_local_tasks": "the memory extractions running in this process, "
    "one per thread, each removed when it ends",
    "graphs/runtime/tool_runner.py:_BATCH": "a ContextVar: per task, not shared",
    "graphs/runtime/ui.py:_DEFERRED": "a ContextVar: per task, not shared",
    "store/server_store.py:_PREPARING": "a ContextVar: per task, not shared",
    "store/backend.py:_IN_PROCESS": "each store's in-process backend, weakly keyed by the store (lives as long as it)",
    "store/server_store.py:_SERVER_BACKENDS": "each server store's SQL backend, weakly keyed by the store "
    "(lives as long as it; `close_server_backends` closes their pools)",
    "store/backends.py:_LOCKS": "one asyncio lock per event loop, weakly keyed by the loop",
    "store/memory/write.py:_last_key": "the millisecond and counter of the last memory id made in this process "
    "(two values; ids made within one millisecond stay in the order written)",
    "store/pool.py:_opened": "the Postgres URIs the package's pools opened in this process, one entry per "
    "database (store/recovery.py waits for it after an outage)",
}
_MUTATORS = {"append", "add", "update", "setdefault", "pop", "popitem", "clear", "move_to_end", "put", "extend"}
_MUTATORS |= {"remove", "discard", "insert", "set"}


def module_state(path: Path) -> dict[str, bool]:
    """Module-level names of `path` (its own or imported) that its code changes (a mutating call,
    an item assignment or deletion, a `global`), each with whether it is a documented cache: an `LRU(...)` (store/lru.py)
    followed by its docstring."""
    tree = ast.parse(path.read_text(), str(path))
    assigned: dict[str, bool] = {}
    for node, following in zip(tree.body, [*tree.body[1:], None], strict=True):
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(target, ast.Name):
            value = node.value
            is_lru = isinstance(value, ast.Call) and getattr(value.func, "id", None) == "LRU"
            documented = (
                isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)
            )
            assigned[target.id] = is_lru and documented
    for node in tree.body:  # another module's table changed here is module state all the same
        if isinstance(node, ast.ImportFrom):
            assigned.update({(alias.asname or alias.name): False for alias in node.names if alias.name != "*"})
    changed: set[str] = set()
    declared_global: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            declared_global.update(node.names)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _MUTATORS:
            if isinstance(node.func.value, ast.Name):
                changed.add(node.func.value.id)
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
            targets = [node.target] if isinstance(node, ast.AugAssign) else node.targets
            changed.update(
                t.value.id for t in targets if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)
            )
    # a name changed in a function is module state only if it is one (assigned at module level; a
    # function's own variable of the same name is counted too: rename it)
    return {name: assigned.get(name, False) for name in (changed & set(assigned)) | declared_global}


def test_graphs_and_store_keep_no_module_state_beyond_documented_caches():
    found = [
        f"{path.relative_to(ROOT)}:{name}"
        for folder in ("graphs", "store")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for name, cache in module_state(path).items()
        if not cache
    ]
    undeclared = sorted(set(found) - set(MODULE_STATE))
    assert not undeclared, (
        "Module-level state (make it graph state, a field of an object, or a store/lru.py LRU with a "
        "docstring saying what it caches and its bound):\n" + "\n".join(undeclared)
    )
    assert sorted(set(MODULE_STATE) - set(found)) == [], "MODULE_STATE lists state that is gone: remove it"


def test_the_state_check_sees_a_dict_a_global_and_an_undocumented_lru(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(
        "from store.lru import LRU\n_seen = {}\n_count = 0\n_plain = LRU(8)\n_kept = LRU(8)\n"
        '"""What it caches; 8 entries."""\n\n\ndef f(key):\n    global _count\n    _count += 1\n'
        "    _seen[key] = 1\n    _plain.put(key, 1)\n    _kept.put(key, 1)\n"
    )
    assert module_state(path) == {"_seen": False, "_count": False, "_plain": False, "_kept": True}
