"""The review page: server-rendered HTML for a bundle and for an agreement.

`serve` answers `/review/bundles/{manifest_hash}` and
`/review/agreements/{id}` with these pages, and `pactwright report` writes
them to files. Each page is one self-contained document rendered with
jinja2 (autoescape on: a clause label, a param or a ledger error cannot
inject markup) from `templates/review/`, reusing the verifier report's
stylesheet and its state-machine SVG (laid out in Python by
`verifier/_svg.py`, so there is no JavaScript at all). Output is
deterministic: no wall clock, no set order, so a bundle's page is the same
bytes every time it is rendered.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path

import jinja2

from pactwright.bundle_check import read_bundle
from pactwright.canonical import load_json
from pactwright.errors import StoreError, UsageError
from pactwright.manifest import MANIFEST_PATH
from pactwright.runtime.ledger_api import Ledger
from pactwright.runtime.store import Store
from pactwright.service.review_agreement import agreement_view
from pactwright.service.review_bundle import bundle_view, check_source
from pactwright.signing import APPROVAL_PATH, SIGNATURES_PATH
from pactwright.verifier import _svg
from pactwright.verifier._report_view import VERDICT_MEANING, plural
from pactwright.verifier.render_html import _steps as counterexample_steps
from pactwright.verifier.render_html import inline

__all__ = ["render_agreement_page", "render_bundle_files", "render_bundle_page", "render_stored_bundle"]


@functools.cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        # The review templates first; the report's stylesheet and SVG macro come from `reports/`.
        loader=jinja2.ChoiceLoader(
            [
                jinja2.PackageLoader("pactwright.templates", "review"),
                jinja2.PackageLoader("pactwright.templates", "reports"),
            ]
        ),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["inline"] = inline
    env.filters["num"] = _svg.fmt
    env.globals.update(plural=plural, meaning=VERDICT_MEANING)
    return env


def render_bundle_files(files: Mapping[str, bytes], source: bytes | None = None) -> str:
    """The page for a bundle's files (already checked against their manifest, as the store's loads are).

    `source`, the policy text, is shown beside each clause only if it
    compiles to the bundle's candidate (PW203 otherwise).
    """
    text = None
    if source is not None:
        text = check_source(source, str(load_json(files[MANIFEST_PATH])["candidate_hash"]))
    view = bundle_view(files, text)
    base = _svg.layout(view.machine)
    cxs = view.report.counterexamples if view.report is not None else ()
    diagrams = [_svg.diagram(base, f"cx{cx.number}", counterexample_steps(cx)) for cx in cxs]
    plain = _svg.diagram(base, "machine")
    return _environment().get_template("bundle.html.j2").render(v=view, diagrams=diagrams, plain=plain)


def render_bundle_page(bundle_dir: Path, source: Path | None = None) -> str:
    """The page for a bundle directory, read with the shared bundle reader (PW412/PW413 if it is not intact)."""
    bundle = read_bundle(bundle_dir)
    data = None
    if source is not None:
        try:
            data = Path(source).read_bytes()
        except OSError as exc:
            raise UsageError(f"cannot read `{source}`: {exc.strerror or exc}") from None
    extras = {path: body for path, body in ((MANIFEST_PATH, bundle.manifest.data), (APPROVAL_PATH, bundle.approval),
                                            (SIGNATURES_PATH, bundle.signatures)) if body is not None}  # fmt: skip
    return render_bundle_files({**bundle.files, **extras}, data)


def render_stored_bundle(store: Store, manifest_hash: str) -> str:
    """The page for a bundle the store holds, by manifest hash (PW710 if it holds none), re-verified on load."""
    record = next((r for r in store.history() if r.manifest_hash == manifest_hash), None)
    if record is None:
        raise StoreError(f"the store holds no bundle with manifest `{manifest_hash[:80]}`", code="PW710")
    return render_bundle_files(store.load_activation(record.id).files)


def render_agreement_page(store: Store, agreement_id: str, ledger: Ledger | None = None) -> str:
    """The page for one agreement (PW501 if unknown); with `ledger`, balances and postings as the ledger holds them."""
    view = agreement_view(store, agreement_id, ledger)
    base = _svg.layout(view.machine)
    steps = [
        _svg.Step(step=n, kind="command", transition=e["transition"], source=e["from"], target=e["to"],
                  state=e["to"], fault=None)
        for n, e in enumerate(view.events, 1)
    ]  # fmt: skip
    path = _svg.diagram(base, "ag", steps)
    return _environment().get_template("agreement.html.j2").render(v=view, diagram=path)
