"""``chainctl push``: a local git repository's commits and refs onto a project; ``git-hash``.

The planning and sending are the SDK's (node.sdk.push); this module parses arguments, maps failures to
chainctl's reason codes and renders the plan (text or --json) and the progress bar.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from node import constants as C
from node.cli.common import CliError, Context, Progress, hex0x, show_ref_name
from node.cli.githash import open_repo
from node.cli.online import commit_failure
from node.errors import CliCode
from node.sdk import git
from node.sdk.push import (
    PushError,
    RefPlan,
    check_full_history,
    plan_push,
    ref_bytes,
    submit_push,
)
from node.sdk.rpc import Dropped


def ref_text(name: str) -> str:
    """A ref name for output: text when it is UTF-8, else 0x-hex of its bytes (valid JSON either way)."""
    return show_ref_name(ref_bytes(name))


def ref_json(p: RefPlan) -> dict[str, Any]:
    return {
        "ref": ref_text(p.name),
        "git": p.sha,
        "old_hash": hex0x(p.old_hash) if p.current is not None else None,
        "new_hash": hex0x(p.new_hash),
        "nonce": p.nonce,
        "status": p.status,
    }


def ref_line(p: RefPlan) -> str:
    short = p.sha[:10]
    if p.up_to_date:
        return f" = {ref_text(p.name)}  {short} (up to date)"
    if p.current is None:
        return f" * {ref_text(p.name)}  {short} (new, nonce 1)"
    mark = "   " if p.fast_forward else " + "
    verb = "fast-forward" if p.fast_forward else "forced"
    return f"{mark}{ref_text(p.name)}  {short} ({verb}, nonce {p.nonce})"


def push(ctx: Context, args: Any) -> None:
    if not 1 <= args.batch <= C.MAX_COMMITS_PER_BUNDLE:
        raise CliError(CliCode.INVALID_ARGUMENT, f"--batch must be 1-{C.MAX_COMMITS_PER_BUNDLE}")
    repo = open_repo(args.repo_path)
    try:
        _push(ctx, args, repo)
    except git.GitError as exc:
        raise CliError(CliCode.GIT_ERROR, str(exc)) from None
    except PushError as exc:
        raise CliError(exc.reason, exc.detail) from None
    except (Dropped, TimeoutError) as exc:
        raise commit_failure(exc) from None


def _push(ctx: Context, args: Any, repo: git.GitRepo) -> None:
    """Plan with the SDK (node.sdk.push), print it (--dry-run) or send it with a progress bar."""
    check_full_history(repo)
    builder = ctx.account_builder()
    pid = ctx.project_id(args.project)
    plan = plan_push(
        ctx.client,
        repo,
        pid,
        refs=args.ref,
        force=bool(args.force),
        prune=bool(args.prune),
        bundle_size=args.batch,
        on_skip=_skipping(ctx),
    )
    summary: dict[str, Any] = {
        "project_id": hex0x(pid),
        "commits_sent": len(plan.commits),
        "commits_already_on_chain": plan.already_on_chain,
        "bundles": [],
        "refs": [ref_json(p) for p in plan.refs],
        "deleted": [{"ref": ref_text(d.name), "old_hash": hex0x(d.old_hash), "nonce": d.nonce} for d in plan.deletes],
        "dry_run": bool(args.dry_run),
    }
    lines = [ref_line(p) for p in plan.refs]
    lines += [f" - {ref_text(d.name)}  (deleted, nonce {d.nonce})" for d in plan.deletes]
    if args.dry_run:
        ctx.emit(summary, [f"would push {len(plan.commits)} commit(s) in {len(plan.bundles)} bundle(s)", *lines])
        return
    progress = Progress("pushing commits", len(plan.commits), ctx.err, ctx.progress_enabled)
    # One step per committed bundle (the SDK reports each as the node commits it).
    try:
        result = submit_push(
            ctx.client, builder, plan, on_bundle=lambda event: progress.advance(event.commits), strict=False
        )
    finally:
        progress.finish()
    summary["bundles"] = [hex0x(h) for h in result.bundle_hashes]
    if result.staging_left:
        ctx.note(f"staging refs left on chain (the next push deletes them): {result.staging_left}")
    if result.ref_errors:  # every ref is tried: the failure names each ref the chain refused, a line each
        refused = [(ref_text(name), why) for name, why in result.ref_errors.items()]
        reason, _, detail = refused[0][1].partition(": ")
        if len(refused) == 1:
            raise CliError(reason, f"{refused[0][0]}: {detail}")
        for name, why in refused:
            ctx.note(f" ! {name}  ({why})")
        raise CliError(reason, f"{len(refused)} ref(s) refused: {', '.join(name for name, _ in refused)}")
    head = f"pushed {len(plan.commits)} commit(s) in {len(result.bundle_hashes)} bundle(s) to {hex0x(pid)}"
    ctx.emit(summary, [head, *lines])


def _skipping(ctx: Context) -> Callable[[str], None]:
    return lambda name: ctx.note(f"skipping {name}: not a commit")
