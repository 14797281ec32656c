"""The console's hook in an instance's Python (mounted read-only at /opt/console/python, first on the
servers' PYTHONPATH; images/contract/README.md).

When a program calls ``wandb.init``, the run's address is appended to ``~/.cache/console/wandb-runs.jsonl``
on the instance's disk: the console reads it to link the run from the instance's page, since W&B keeps
a run's address only in the program's memory. Nothing else changes: the run, its return value and its
errors are W&B's own, and the image's own ``sitecustomize`` (if any) still runs, after this one.

It must never break a program: every step is guarded, and it costs one ``sys.meta_path`` entry until
``wandb`` is imported (most programs never import it).
"""

import contextlib
import sys


def _record(run) -> None:
    import json
    import os
    import time

    url = getattr(run, "url", None)
    if not isinstance(url, str) or not url.startswith("https://"):
        return  # offline or disabled runs have no address
    entry = {
        "url": url,
        "name": str(getattr(run, "name", "") or "")[:200],
        "project": str(getattr(run, "project", "") or "")[:200],
        "entity": str(getattr(run, "entity", "") or "")[:200],
        "id": str(getattr(run, "id", "") or "")[:64],
        "at": int(time.time()),
    }
    folder = os.path.join(os.path.expanduser("~"), ".cache", "console")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    path = os.path.join(folder, "wandb-runs.jsonl")
    try:
        if os.path.getsize(path) > 256 * 1024:  # keep the newest: the console reads only the tail
            os.replace(path, path + ".1")
    except OSError:
        pass
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry) + "\n")


def _wrap(init):
    import functools

    @functools.wraps(init)
    def console_wandb_init(*args, **kwargs):
        run = init(*args, **kwargs)
        with contextlib.suppress(Exception):  # the hook never breaks the program
            _record(run)
        return run

    console_wandb_init.__console_wrapped__ = True
    return console_wandb_init


class _WandbFinder:
    """Finds nothing itself: when ``wandb`` is about to be imported, it lets the real finders find it and
    wraps its loader, so ``wandb.init`` is wrapped as soon as the module has run."""

    def find_spec(self, name, path=None, target=None):
        if name != "wandb":
            return None
        import importlib.machinery

        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader = spec.loader
        original = loader.exec_module

        def exec_module(module):
            original(module)
            with contextlib.suppress(Exception):
                init = getattr(module, "init", None)
                if callable(init) and not getattr(init, "__console_wrapped__", False):
                    module.init = _wrap(init)

        loader.exec_module = exec_module
        return spec


def _chain() -> None:
    """Run the next ``sitecustomize`` on the path (the image's own), as Python would have without us."""
    import importlib.machinery
    import importlib.util
    import os

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


with contextlib.suppress(Exception):
    if "wandb" not in sys.modules:
        sys.meta_path.insert(0, _WandbFinder())

try:
    _chain()
except Exception:
    sys.stderr.write("console: the image's own sitecustomize failed\n")
