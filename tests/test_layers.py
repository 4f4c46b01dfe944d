"""The layering of gradtape's own modules (issue 11, item 4; folders since issue 23), checked by reading the
source with ``ast``.

Every module of the package ``gradtape/`` belongs to one layer of :data:`LAYERS`; the folders are layers
(``core/`` at the bottom, in layers of its own, then ``backends/``, ``ops/``, ``autodiff/``, ``compile/``,
...).  A module may import only from its own layer or from a layer below, and the imports among the
project's modules form no cycle, within a layer or across layers.  Imports placed inside functions count
like those at the top of a module: a cycle hidden behind a function-level import is still a cycle.  A
function-level import of one of the project's own modules stays only where it breaks no rule and says
why, in a comment on its line or on the line above.  Outside ``gradtape/core/``, a module takes from a
core module only the names that module lists in its ``__all__`` (the wall around the core).

How an import is read:

* ``import gradtape.ops.nn`` and ``from gradtape.ops import nn`` import ``gradtape.ops.nn``;
* ``from gradtape.ops import apply`` (``apply`` no submodule) imports ``gradtape.ops``, the package's
  ``__init__``; likewise ``from gradtape import Tensor`` and ``import gradtape as gt`` import
  ``gradtape``, the package's ``__init__``, which is in the top layer of the library;
* relative imports are resolved against the importing module's package;
* strings handed to ``importlib.import_module`` (the plugin entry points) are not imports here.

``python3 tests/test_layers.py`` prints the full report: every violation by importing file, the
cycles, the function-level imports of the project's modules, and the names that lower layers take
from the modules they reach up into.  ``--names MODULE`` lists who takes which names from a module,
``--root DIR`` reads another checkout (``git archive HEAD | tar -x -C DIR`` gives one).
"""

from __future__ import annotations

import ast
import fnmatch
import re
import sys
from collections import defaultdict, deque
from dataclasses import dataclass, field
from pathlib import Path

# ---------------------------------------------------------------------------------------------------------
# The layer map, from the bottom.  Each entry is (label, title, module-name patterns; fnmatch syntax, where
# ``*`` also matches dots).  A module may import from its own layer and from those listed before it.
# Names listed for modules that do not exist (yet, or any more) are harmless.
LAYERS = [
    # gradtape/core/: the engine room, behind a wall (see test_nothing_private_is_taken_across_the_wall)
    (
        "core 0",
        "pure data",
        ["gradtape.core", "gradtape.core.dtypes", "gradtape.core.registry", "gradtape.core.domains"],
    ),
    (
        "core 1",
        "backend protocol and configuration",
        ["gradtape.core.backend", "gradtape.core.backend_registry", "gradtape.core.config"],
    ),
    ("core 2", "tensor", ["gradtape.core.recording_state", "gradtape.core.tensor"]),
    ("core 3", "engine", ["gradtape.core.engine", "gradtape.core.unbroadcast", "gradtape.core.rule_namespace"]),
    ("core 4", "dispatch", ["gradtape.core.dispatch"]),
    # gradtape/backends/: the adapters and the stand-in backend of a trace
    ("backends", "adapters", ["gradtape.backends", "gradtape.backends.*"]),
    # gradtape/ops/: the vocabulary, the chapters, the operators bound to Tensor
    ("ops 0", "op vocabulary", ["gradtape.ops"]),
    ("ops 1", "op chapters", ["gradtape.ops.*"]),
    ("ops 2", "operators bound to Tensor", ["gradtape.ops.operators"]),
    # gradtape/autodiff/, compile/, training/: the front ends, each on those below
    ("autodiff", "tape, jacobians, forward mode, custom gradients", ["gradtape.autodiff", "gradtape.autodiff.*"]),
    ("compile", "gt.function and its control flow", ["gradtape.compile", "gradtape.compile.*"]),
    # the namespaces of TensorFlow's names (tf.math, tf.nn, tf.random), on the ops and the tape
    ("namespaces", "gt.math, gt.nn, gt.random", ["gradtape.math", "gradtape.nn", "gradtape.random"]),
    ("training", "layers, optimizers, losses, modules, checkpoints", ["gradtape.training", "gradtape.training.*"]),
    # the checking tools, the bridges to other libraries, the package itself
    (
        "api",
        "tools and the public package",
        [
            "gradtape.errors",
            "gradtape.testing",
            "gradtape.testing.*",
            "gradtape.interop",
            "gradtape.interop.*",
            "gradtape.habits",
            "gradtape",
        ],
    ),
    ("conformance", "conformance suite", ["gradtape.conformance", "gradtape.conformance.*"]),
    ("cli", "command line", ["gradtape.cli", "gradtape.__main__", "gradtape.conformance.__main__"]),
]

# source folder -> the package it is installed as
PACKAGES = {"gradtape": "gradtape"}

RULE_UP = "a module may import only from its own layer or below"
RULE_CYCLE = "the imports among the project's modules form no cycle (function-level imports count)"
RULE_MAP = "every module of the project is in the layer map (LAYERS at the top of tests/test_layers.py)"
RULE_WHY = (
    "a function-level import of one of the project's modules says why, in a comment on its line or on the line above"
)

ROOT = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Import:
    importer: str  # the importing module
    path: str  # its file, relative to the root
    line: int
    end_line: int
    target: str  # the imported module of the project
    names: tuple  # the names taken from it by ``from ... import`` ('*' for all)
    function_level: bool
    commented: bool  # a comment (other than noqa & co.) on its line(s) or just above


@dataclass
class Project:
    root: Path
    modules: dict = field(default_factory=dict)  # module -> relative path
    imports: list = field(default_factory=list)  # [Import]
    attributes: dict = field(default_factory=dict)  # (importer, module) -> {attribute names used}
    errors: list = field(default_factory=list)  # files that do not parse


def _layer_index():
    """pattern list flattened: [(rank, pattern)]"""
    return [(rank, pat) for rank, (_, _, pats) in enumerate(LAYERS) for pat in pats]


def layers_of(module):
    """The ranks of the layers whose patterns match ``module`` (one, where the map is right).  A module
    named exactly is in that layer, whatever a pattern with ``*`` says (``gradtape.ops.operators`` above
    the chapters ``gradtape.ops.*``)."""
    exact = {rank for rank, pat in _layer_index() if pat == module}
    return sorted(exact or {rank for rank, pat in _layer_index() if fnmatch.fnmatchcase(module, pat)})


def layer_name(rank):
    label, title, _ = LAYERS[rank]
    return f"layer {label} ({title})"


def _normalize(name):
    """'backends.x' -> 'gradtape.backends.x'; other spellings of the installed names."""
    for folder, package in PACKAGES.items():
        if folder != package and (name == folder or name.startswith(folder + ".")):
            return package + name[len(folder) :]
    return name


def _is_own(name):
    return name == "gradtape" or name.startswith("gradtape.")


_MARKER = re.compile(
    r"noqa(:\s*[A-Z]+[0-9]+(\s*,\s*[A-Z]+[0-9]+)*)?|type:\s*ignore(\[[^\]]*\])?|pragma:[^#]*", re.IGNORECASE
)


def _comment(text):
    """The comment of an import statement's line, less noqa, type: ignore and pragma markers ('' if none).
    No '#' can stand in an import statement but the one that opens a comment."""
    _, hash_, rest = text.partition("#")
    return _MARKER.sub("", rest).strip(" #\t") if hash_ else ""


def _says_why(node, lines, group_start):
    """A comment on the statement's lines, or on a comment-only line just above it or above the group of
    import statements (one per line after the other) that it ends, so one comment can head a group."""
    if any(_comment(lines[n - 1]) for n in range(node.lineno, (node.end_lineno or node.lineno) + 1)):
        return True
    above = lines[group_start - 2].strip() if group_start >= 2 else ""
    return above.startswith("#") and bool(_comment(above))


def discover(root):
    """module name -> path relative to root, for every .py file of the project's packages."""
    modules = {}
    for folder, package in PACKAGES.items():
        base = root / folder
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*.py")):
            rel = path.relative_to(base)
            if "__pycache__" in rel.parts:
                continue
            parts = list(rel.with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join([package, *parts])] = str(path.relative_to(root))
    return modules


def _parse_module(project, module, rel, with_attributes):
    source = (project.root / rel).read_text(encoding="utf-8")
    try:
        tree = ast.parse(source, filename=rel)
    except SyntaxError as e:
        project.errors.append(f"{rel}:{e.lineno}: does not parse: {e.msg}")
        return
    lines = source.splitlines()
    is_package = Path(rel).name == "__init__.py"
    package = module if is_package else module.rpartition(".")[0]
    bindings = {}  # local name -> module of the project it is bound to

    def resolve(name):
        """The module a dotted own name refers to: itself when it is a module, else its longest module prefix."""
        while name and name not in project.modules:
            name = name.rpartition(".")[0]
        return name

    def add(node, target, names, in_function, group_start):
        project.imports.append(
            Import(
                module,
                rel,
                node.lineno,
                node.end_lineno or node.lineno,
                target,
                tuple(names),
                in_function,
                _says_why(node, lines, group_start),
            )
        )

    def visit(body, in_function):
        # imports are statements: walking the statement lists (not the expressions) finds them all
        prev = group_start = None
        for node in body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                if not (isinstance(prev, (ast.Import, ast.ImportFrom)) and node.lineno == prev.end_lineno + 1):
                    group_start = node.lineno
            prev = node
            if isinstance(node, ast.Import):
                for alias in node.names:
                    name = _normalize(alias.name)
                    if not _is_own(name):
                        continue
                    add(node, name, (), in_function, group_start)  # a name that is no module: map_problems says so
                    first = alias.name.split(".")[0]
                    bindings[alias.asname or first] = name if alias.asname else _normalize(first)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package
                    for _ in range(node.level - 1):
                        base = base.rpartition(".")[0]
                    base = f"{base}.{node.module}" if node.module else base
                else:
                    base = _normalize(node.module or "")
                if _is_own(base):
                    taken = defaultdict(list)
                    for alias in node.names:
                        sub = f"{base}.{alias.name}"
                        if alias.name != "*" and sub in project.modules:
                            taken.setdefault(sub, [])
                            bindings[alias.asname or alias.name] = sub
                        else:
                            taken[base].append(alias.name)
                    for target, names in taken.items():
                        add(node, target, names, in_function, group_start)
            else:
                inner = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                for name in ("body", "orelse", "finalbody"):
                    sub = getattr(node, name, None)
                    if isinstance(sub, list):
                        visit(sub, inner)
                for part in [*getattr(node, "handlers", ()), *getattr(node, "cases", ())]:
                    visit(part.body, inner)

    visit(tree.body, False)

    # attribute uses through a bound module (``_t.record``, ``gt.ops.nn.relu``): for the --names listing only
    if with_attributes and bindings:
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or not isinstance(node.ctx, ast.Load):
                continue
            chain, cur = [], node
            while isinstance(cur, ast.Attribute):
                chain.append(cur.attr)
                cur = cur.value
            if not isinstance(cur, ast.Name) or cur.id not in bindings:
                continue
            dotted = ".".join([bindings[cur.id], *reversed(chain)])
            owner = resolve(dotted)
            rest = dotted[len(owner) + 1 :] if owner and len(dotted) > len(owner) else ""
            if owner and rest:
                project.attributes.setdefault((module, owner), set()).add(rest.split(".")[0])


def scan(root=ROOT, with_attributes=False):
    """Read the project.  ``with_attributes``: also note the attributes read off bound modules (for --names)."""
    project = Project(Path(root))
    project.modules = discover(project.root)
    for module, rel in project.modules.items():
        _parse_module(project, module, rel, with_attributes)
    return project


# ---------------------------------------------------------------------------------------------------------
def _where(imp):
    return f"{imp.path}:{imp.line}"


def _kind(imp):
    return "function-level" if imp.function_level else "top-level"


def _rank(module):
    ranks = layers_of(module)
    return ranks[0] if len(ranks) == 1 else None


def _label(module):
    rank = _rank(module)
    return "?" if rank is None else LAYERS[rank][0]


def map_problems(project):
    """[(path, line, message)] for modules outside the layer map (or in two layers), imports of modules the
    project does not have, and files that do not parse."""
    out = []
    for module, rel in project.modules.items():
        ranks = layers_of(module)
        if not ranks:
            out.append((rel, 0, f"{module} is in no layer: add it to the layer map. Rule: {RULE_MAP}"))
        elif len(ranks) > 1:
            out.append(
                (
                    rel,
                    0,
                    f"{module} matches {', '.join(layer_name(r) for r in ranks)}: one layer only. Rule: {RULE_MAP}",
                )
            )
    for imp in project.imports:
        if imp.target not in project.modules:
            out.append(
                (
                    imp.path,
                    imp.line,
                    f"{imp.importer} imports {imp.target}, which is no module of the project ({_kind(imp)})",
                )
            )
    for err in project.errors:
        path, line, msg = err.split(":", 2)
        out.append((path, int(line or 0), msg.strip()))
    return out


def upward(project):
    """[Import] reaching up a layer."""
    out = []
    for imp in project.imports:
        lo, hi = _rank(imp.importer), _rank(imp.target)
        if lo is not None and hi is not None and hi > lo:
            out.append(imp)
    return out


def describe_up(imp):
    return (
        f"{_where(imp)}: {imp.importer} ({layer_name(_rank(imp.importer))}) imports {imp.target} "
        f"({layer_name(_rank(imp.target))}), {_kind(imp)}. Rule: {RULE_UP}"
    )


def graph(project, without=()):
    """importer -> target -> [Import], among the project's modules, without self-imports (and without the
    imports in ``without``)."""
    without = set(without)
    g = defaultdict(lambda: defaultdict(list))
    for imp in project.imports:
        if imp.target in project.modules and imp.target != imp.importer and imp not in without:
            g[imp.importer][imp.target].append(imp)
    return g


def cycles(g, modules):
    """The strongly connected components of more than one module (Tarjan), largest first."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(g[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(modules):
        if v not in index:
            strong(v)
    return sorted(out, key=lambda c: (-len(c), c))


def all_cycles(project):
    """(graph, components): every cycle, the imports reaching up included."""
    g = graph(project)
    return g, cycles(g, project.modules)


def layer_cycles(project):
    """(graph, components): the cycles that stay once no import reaches up: each within one layer."""
    g = graph(project, without=upward(project))
    return g, cycles(g, project.modules)


def shortest_cycle(g, start, members):
    """The shortest cycle through ``start`` inside ``members``: [start, ..., start]."""
    prev = {start: None}
    queue = deque([start])
    while queue:
        v = queue.popleft()
        for w in sorted(g[v]):
            if w not in members:
                continue
            if w == start:
                path = [v]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return [*reversed(path), start]
            if w not in prev:
                prev[w] = v
                queue.append(w)
    return None


def distinct_cycles(g, comp):
    """The shortest cycle through each member of a component, each cycle once, shortest first."""
    seen, out = set(), []
    members = set(comp)
    for m in comp:
        path = shortest_cycle(g, m, members)
        if path is None:
            continue
        key = frozenset(zip(path, path[1:]))
        if key not in seen:
            seen.add(key)
            out.append(path)
    return sorted(out, key=lambda p: (len(p), p))


def describe_cycle(g, path, indent="    "):
    lines = [indent + " -> ".join(path)]
    for a, b in zip(path, path[1:]):
        imps = g[a][b]
        first = ([i for i in imps if not i.function_level] or imps)[0]
        more = f", and {len(imps) - 1} more" if len(imps) > 1 else ""
        lines.append(
            f"{indent}    {_where(first)}: {a} (layer {_label(a)}) imports {b} (layer {_label(b)}), "
            f"{_kind(first)}{more}"
        )
    return lines


def function_level(project):
    """[Import] of the project's own modules placed inside functions (self-imports included)."""
    return [imp for imp in project.imports if imp.function_level]


def unexplained(project):
    """Function-level imports of the project's modules that reach up no layer and have no comment."""
    up = set(upward(project))
    return [imp for imp in function_level(project) if imp not in up and not imp.commented]


# ---------------------------------------------------------------------------------------------------------
# The tests.  They read the source once per run (others edit it concurrently: each run sees the files as
# they are then).
_SCANNED = []


def _project():
    if not _SCANNED:
        _SCANNED.append(scan())
    return _SCANNED[0]


def _fail(title, lines):
    raise AssertionError(f"{title}:\n" + "\n".join(lines) + "\n(`python3 tests/test_layers.py` prints the full report)")


def test_every_module_is_in_the_layer_map():
    problems = map_problems(_project())
    if problems:
        _fail(
            f"{len(problems)} modules outside the layer map, or imports of no module",
            [f"{path}:{line}: {msg}" for path, line, msg in problems],
        )


def test_no_import_reaches_up_a_layer():
    ups = upward(_project())
    if ups:
        _fail(f"{len(ups)} imports reach up a layer", [describe_up(imp) for imp in ups])


def test_no_import_cycles():
    project = _project()
    g, comps = all_cycles(project)
    if not comps:
        return
    lines = []
    for comp in comps:
        lines.append(f"a cycle among {len(comp)} modules: " + ", ".join(f"{m} (layer {_label(m)})" for m in comp))
        paths = distinct_cycles(g, comp)
        for path in paths[:4]:
            lines.extend(describe_cycle(g, path))
        if len(paths) > 4:
            lines.append(f"    ... and {len(paths) - 4} more")
    ng, left = layer_cycles(project)
    n_up = len(upward(project))
    lines.append(
        f"once the {n_up} imports that reach up a layer are gone, {len(left)} cycles stay within a layer"
        + (":" if left else ".")
    )
    for comp in left:
        lines.append(f"  within layer {_label(comp[0])}, among {len(comp)} modules: {', '.join(comp)}")
        for path in distinct_cycles(ng, comp):
            lines.extend(describe_cycle(ng, path))
    lines.append(f"Rule: {RULE_CYCLE}")
    _fail(f"{len(comps)} import cycles", lines)


def test_function_level_imports_of_own_modules_say_why():
    missing = unexplained(_project())
    if missing:
        _fail(
            f"{len(missing)} function-level imports of the project's modules say not why",
            [
                f"{_where(imp)}: {imp.importer} imports {imp.target} inside a function, with no comment on its "
                f"line or the line above. Rule: {RULE_WHY}"
                for imp in missing
            ],
        )


# ---------------------------------------------------------------------------------------------------------
# The report
def names_taken(project, module):
    """importer -> sorted names it takes from ``module`` (``from`` imports and, where the project was scanned
    with_attributes, attributes read off the module); '<module>' where it takes the module itself."""
    out = defaultdict(set)
    for imp in project.imports:
        if imp.target == module:
            out[imp.importer].update(imp.names or ("<module>",))
    for (importer, owner), names in project.attributes.items():
        if owner == module:
            out[importer].update(names)
    for names in out.values():
        if len(names) > 1:
            names.discard("<module>")
    return {k: sorted(v) for k, v in out.items()}


def names_report(project, module):
    taken = names_taken(project, module)
    rank = _rank(module)
    head = f"Names taken from {module}" + (f" ({layer_name(rank)})" if rank is not None else "")
    lines = [head, "-" * len(head)]
    if not taken:
        return [*lines, "  (no importer)"]
    by_layer = defaultdict(dict)
    for importer, names in taken.items():
        by_layer[_rank(importer)][importer] = names
    below, other = set(), set()
    for r in sorted(by_layer, key=lambda r: (r is None, r)):
        tag = "  <- below it: these reach up" if r is not None and rank is not None and r < rank else ""
        lines.append(f"  {'?' if r is None else layer_name(r)}{tag}")
        for importer in sorted(by_layer[r]):
            names = by_layer[r][importer]
            lines.append(f"    {importer}: {', '.join(names)}")
            if r is not None and rank is not None:
                (below if r < rank else other).update(n for n in names if n != "<module>")
    if rank is not None:
        lines.append(f"  taken by lower layers: {', '.join(sorted(below)) or '-'}")
        lines.append(f"  taken only by its own layer and above: {', '.join(sorted(other - below)) or '-'}")
    return lines


def report(project, names=()):
    ups = upward(project)
    up_set = set(ups)
    g, comps = all_cycles(project)
    ng, left = layer_cycles(project)
    left_edges = {(a, b) for comp in left for a in comp for b in ng[a] if b in comp}
    problems = map_problems(project)
    fl = function_level(project)
    missing = set(unexplained(project))

    def on_left_cycle(imp):
        return (imp.importer, imp.target) in left_edges and imp not in up_set

    def sizes(cs):
        return " (" + ", ".join(f"{len(c)} modules" for c in cs) + ")" if cs else ""

    out = [
        f"Layering report for {project.root}: {len(project.modules)} modules, "
        f"{len(project.imports)} imports of the project's modules",
        "",
    ]
    out += ["Summary", "-------"]
    out.append(f"  modules outside the layer map, imports of no module: {len(problems)}")
    out.append(
        f"  imports reaching up a layer: {len(ups)} ({sum(not i.function_level for i in ups)} top-level, "
        f"{sum(i.function_level for i in ups)} function-level), in {len({i.path for i in ups})} files"
    )
    out.append(f"  import cycles: {len(comps)}{sizes(comps)}")
    out.append(
        f"  cycles left within a layer once no import reaches up: {len(left)}{sizes(left)}, "
        f"made of {sum(on_left_cycle(i) for i in project.imports)} imports"
    )
    out.append(
        f"  function-level imports of the project's modules: {len(fl)}: "
        f"{sum(i in up_set for i in fl)} reach up, {sum(on_left_cycle(i) for i in fl)} on a cycle within a "
        f"layer, {sum(i.importer == i.target for i in fl)} self-imports; "
        f"{len(missing)} reach up no layer and say not why"
    )
    out.append("")

    out += ["Layer map, bottom first, and the modules in each layer", "-" * 54]
    for rank, (label, title, _) in enumerate(LAYERS):
        mods = sorted(m for m in project.modules if _rank(m) == rank)
        out.append(f"  {label:>3} {title}: {', '.join(mods) or '-'}")
    out.append("")

    if problems:
        out += ["Modules outside the layer map, imports of no module", "-" * 51]
        out.extend(f"  {path}:{line}: {msg}" for path, line, msg in problems)
        out.append("")

    out += [
        "Violations by importing file",
        "-" * 28,
        f"  UP: reaches up a layer ({RULE_UP})",
        "  CYCLE: on a cycle within one layer, one that stays once no import reaches up (cut one import of "
        "each such cycle)",
        "  file:line  imported-module  reason",
    ]
    by_file = defaultdict(list)
    for imp in project.imports:
        if imp in up_set:
            by_file[imp.path].append((imp, f"UP: layer {_label(imp.importer)} -> layer {_label(imp.target)}"))
        elif on_left_cycle(imp):
            by_file[imp.path].append((imp, f"CYCLE within layer {_label(imp.importer)}"))
    for path in sorted(by_file):
        mod = by_file[path][0][0].importer
        out.append(f"  {path}  [{mod}, {layer_name(_rank(mod))}]")
        for imp, why in sorted(by_file[path], key=lambda t: (t[0].line, t[0].target)):
            took = f" ({', '.join(imp.names)})" if imp.names else ""
            out.append(f"    {_where(imp)}  {imp.target}{took}  {why}, {_kind(imp)}")
    if not by_file:
        out.append("  (none)")
    out.append("")

    out += ["Cycles", "------"]
    for n, comp in enumerate(comps, 1):
        out.append(f"  cycle {n}, among {len(comp)} modules: " + ", ".join(f"{m} ({_label(m)})" for m in comp))
        out.append("  the shortest cycle through each of them:")
        for path in distinct_cycles(g, comp):
            out.extend(describe_cycle(g, path))
        out.append("")
    out.append(f"  Once the {len(ups)} imports that reach up are gone, these cycles stay, each within a layer:")
    for comp in left:
        out.append(f"  within layer {_label(comp[0])}, among {len(comp)} modules: {', '.join(comp)}")
        for path in distinct_cycles(ng, comp):
            out.extend(describe_cycle(ng, path))
        out.append("    its imports:")
        for a in comp:
            for b in sorted(ng[a]):
                if b in comp:
                    imps = ng[a][b]
                    out.append(f"      {a} -> {b}  [{', '.join(f'{_where(i)} {_kind(i)}' for i in imps)}]")
    if not left:
        out.append("  (none)")
    out.append("")

    out += [
        "Function-level imports of the project's modules, by file",
        "-" * 57,
        "  UP: reaches up a layer; CYCLE: on a cycle within a layer; SELF: imports its own module;",
        "  NO-WHY: no comment on its line or the line above; ok: may stay",
    ]
    fl_by_file = defaultdict(list)
    for imp in fl:
        fl_by_file[imp.path].append(imp)
    for path in sorted(fl_by_file):
        imps = sorted(fl_by_file[path], key=lambda i: (i.line, i.target))
        out.append(f"  {path} ({len(imps)})")
        for imp in imps:
            status = [
                s
                for s, on in (
                    ("UP", imp in up_set),
                    ("CYCLE", on_left_cycle(imp)),
                    ("SELF", imp.importer == imp.target),
                    ("NO-WHY", not imp.commented),
                )
                if on
            ]
            took = f" ({', '.join(imp.names)})" if imp.names else ""
            out.append(f"    {_where(imp)}  {imp.target}{took}  {' '.join(status) or 'ok'}")
    if not fl_by_file:
        out.append("  (none)")
    out.append("")

    reached = sorted({imp.target for imp in ups} | set(names))
    if reached:
        out += ["What is taken from the modules that lower layers reach up into", "-" * 63, ""]
        for module in reached:
            out.extend(names_report(project, module))
            out.append("")
    return "\n".join(out)


def main(argv=None):
    import argparse

    parser = argparse.ArgumentParser(description="Report on the layering of gradtape's modules.")
    parser.add_argument("--root", default=str(ROOT), help="the checkout to read (default: this one)")
    parser.add_argument(
        "--names", nargs="*", default=(), metavar="MODULE", help="also list who takes which names from these modules"
    )
    parser.add_argument("--only-names", action="store_true", help="print only the --names listings")
    args = parser.parse_args(argv)
    project = scan(args.root, with_attributes=True)
    if args.only_names:
        print("\n\n".join("\n".join(names_report(project, m)) for m in args.names))
        return 0
    print(report(project, args.names))
    failed = map_problems(project) or upward(project) or all_cycles(project)[1] or unexplained(project)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())


# ---------------------------------------------------------------------------------------------------------
# The wall around the core (issue 23): outside gradtape/core/, a module takes from a core module only the
# names that module exports in its ``__all__``, by ``from ... import`` or as an attribute of the module.
CORE = "gradtape.core"
RULE_WALL = (
    "outside gradtape/core/, a module takes from a core module only the names in its __all__ (make the name "
    "public and list it there, or keep the code that needs it inside the core)"
)


def _inside_core(module):
    return module == CORE or module.startswith(CORE + ".")


def exported(project, module):
    """The names a module lists in ``__all__`` (a literal list or tuple of strings); None without one."""
    tree = ast.parse((project.root / project.modules[module]).read_text(encoding="utf-8"))
    for node in tree.body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) and node.value is not None:
            return {e.value for e in node.value.elts if isinstance(e, ast.Constant)}
    return None


def across_the_wall(project):
    """[(importer, core module, name)] taken across the wall that the core module does not export."""
    out = set()
    exports = {}
    for imp in project.imports:
        if _inside_core(imp.importer) or not _inside_core(imp.target) or imp.target == CORE:
            continue
        exports.setdefault(imp.target, exported(project, imp.target) or set())
        # (``import *`` takes exactly the module's __all__)
        out.update((imp.importer, imp.target, n) for n in imp.names if n != "*" and n not in exports[imp.target])
    for (importer, owner), names in project.attributes.items():
        if _inside_core(importer) or not _inside_core(owner) or owner == CORE:
            continue
        exports.setdefault(owner, exported(project, owner) or set())
        dunder = {n for n in names if n.startswith("__") and n.endswith("__")}  # (__all__, __name__: any module's)
        out.update((importer, owner, n) for n in names - dunder if n not in exports[owner] and n not in project.modules)
    return sorted(out)


def test_every_core_module_declares_its_exports():
    project = scan()
    missing = [m for m in project.modules if _inside_core(m) and m != CORE and exported(project, m) is None]
    assert not missing, f"core modules without __all__ (what the rest may take from them): {missing}"


def test_nothing_private_is_taken_across_the_wall():
    taken = across_the_wall(scan(with_attributes=True))
    if taken:
        _fail(
            f"{len(taken)} names taken across the wall around gradtape/core/",
            [
                f"{importer} takes {owner}.{name}, which {owner} does not export. Rule: {RULE_WALL}"
                for importer, owner, name in taken
            ],
        )
