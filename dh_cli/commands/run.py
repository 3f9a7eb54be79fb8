"""`dh run` and `dh resume`: thin commands over the supervisor."""

from __future__ import annotations

import os
from typing import Annotated, Optional

import typer

from .. import output
from ..confine import place
from ..errors import NativeStateError, UsageError
from ..wrappers.replay import parse_overrides
from ..resume.plan import resume_session, start_run
from ..supervisor.launch import default_env
from ..supervisor.policy import PolicyConfig
from ..supervisor.spec import RunOptions
from ..worlds.local import LocalWorld
from .args import HarnessArg, SessionArg

StallOpt = Annotated[Optional[float], typer.Option("--stall-timeout", help="Seconds without progress during an open turn before dh treats the harness as hung")]
RestartsOpt = Annotated[Optional[int], typer.Option("--max-restarts", help="Restarts before dh gives up (FATAL) (default 5, or the config file)")]
GraceOpt = Annotated[Optional[float], typer.Option("--tool-grace", help="Seconds a tool command may run on after the harness died (default 3, or the config file)")]
ReplayOpt = Annotated[Optional[list[str]], typer.Option("--replay", help="TOOL=safe|never: how a cut-off call of TOOL is reported")]
WorldOpt = Annotated[Optional[str], typer.Option("--world", help="Replicate the session live to this world and hold its lease there: postgres (default: the config's world, DH_WORLD, or $WORKFLOW_TARGET_WORLD set to @workflow/world-postgres)")]
UrlOpt = Annotated[Optional[str], typer.Option("--url", help="PostgreSQL URL for --world (default: the config's postgres_url, $DH_POSTGRES_URL, then $WORKFLOW_POSTGRES_URL)")]
LeaseTtlOpt = Annotated[Optional[float], typer.Option("--lease-ttl", help="Seconds the session's lease in the world lives without a heartbeat (default 15, or the config's lease_ttl)")]
LeaseEpochOpt = Annotated[Optional[int], typer.Option("--lease-epoch", hidden=True, help="(dh worker) the epoch it claimed for this resume")]
PromptOpt = Annotated[Optional[str], typer.Option("--prompt", help="The prompt sent on resume (default: continue where it left off)")]


def _options(stall, restarts, grace, replay, supervise=True, world=None, url=None, ttl=None,
             lease=None, adopt_epoch=None) -> RunOptions:
    """Flags given on the command line win over the environment, the config file and the
    defaults (None means "not given"); see dh_cli/config.py."""
    flags = {"stall_timeout": stall, "restart.max_restarts": restarts, "tool_grace": grace}
    flags.update({f"replay.{tool}": cls for tool, cls in parse_overrides(replay or []).items()})
    from ..config import load as load_config  # pydantic: imported by the commands that need it

    s = load_config(flags).settings
    policy = PolicyConfig(max_restarts=s.restart.max_restarts, start_secs=s.restart.start_secs,
                          backoff_cap=s.restart.backoff_cap)
    return RunOptions(cwd=os.getcwd(), env=default_env(),
                      stall_timeout=s.stall_timeout or None, tool_grace=s.tool_grace,
                      replay=dict(s.replay), continue_prompt=s.continue_prompt, policy=policy,
                      supervise=supervise, notice=output.note,
                      link=_link(s, world, url, ttl, lease, adopt_epoch))


def _link(settings, world, url, ttl, lease, adopt_epoch):
    from ..worlds.live_world import link_for  # psycopg loads only for a live world

    epoch = lease.epoch if lease is not None else None
    return link_for(world, url, ttl, settings, output.note, epoch, adopt_epoch, lease)


def run_command(
    harness: HarnessArg,
    args: Annotated[Optional[list[str]], typer.Argument(help="The harness's own arguments, after --")] = None,
    stall_timeout: StallOpt = None,
    max_restarts: RestartsOpt = None,
    tool_grace: GraceOpt = None,
    replay: ReplayOpt = None,
    world_name: WorldOpt = None,
    url: UrlOpt = None,
    lease_ttl: LeaseTtlOpt = None,
) -> None:
    """Run a harness under supervision: log its session live and resume it after a crash.

    Example:
      $ dh run claude -- -p "fix the failing test" --output-format stream-json --verbose
      $ dh run pi --stall-timeout 300 -- -p "add a changelog entry"
      $ dh run claude --world postgres -- -p "fix it"
    """
    if url and not world_name:
        raise UsageError("--url needs --world", hint="e.g. dh run HARNESS --world postgres --url URL -- ...")
    opts = _options(stall_timeout, max_restarts, tool_grace, replay, world=world_name, url=url,
                    ttl=lease_ttl)
    if not os.path.isdir(opts.cwd):
        raise NativeStateError(f"the working directory {opts.cwd} does not exist")
    raise typer.Exit(start_run(LocalWorld(), harness, list(args or []), opts))


def resume_command(
    session: SessionArg,
    prompt: PromptOpt = None,
    no_supervise: Annotated[bool, typer.Option("--no-supervise", help="Resume once; do not restart it if it crashes again")] = False,
    stall_timeout: StallOpt = None,
    max_restarts: RestartsOpt = None,
    tool_grace: GraceOpt = None,
    replay: ReplayOpt = None,
    world_name: Annotated[Optional[str], typer.Option("--world", help="Pull the session from this world first (postgres); it then replicates live under its lease")] = None,
    url: Annotated[Optional[str], typer.Option("--url", help="PostgreSQL URL for --world (default: $DH_POSTGRES_URL, then $WORKFLOW_POSTGRES_URL)")] = None,
    cwd: Annotated[Optional[str], typer.Option("--cwd", help="Move the session to this checkout and resume it there")] = None,
    workspace: Annotated[Optional[str], typer.Option("--workspace", help="keep|restore: when the checkout differs from the session's last workspace snapshot (default: ask on a terminal, keep without one)")] = None,
    lease_ttl: LeaseTtlOpt = None,
    steal: Annotated[bool, typer.Option("--steal", help="With --world: end another holder's live lease (the epoch moves on, its writes are refused) instead of refusing")] = False,
    wait: Annotated[Optional[float], typer.Option("--wait", help="With --world: wait up to this many seconds for another holder's lease to end")] = None,
    lease_epoch: LeaseEpochOpt = None,
) -> None:
    """Resume a session from the log: restore its native state, repair the cut step, relaunch.

    Example:
      $ dh resume 1m8k6p
      $ dh resume 1m8k6p --prompt "finish the refactor" --no-supervise
      $ dh resume 1m8k6p --world postgres --cwd ~/src/app
    """
    world = LocalWorld()
    if url and not world_name:
        raise UsageError("--url needs --world", hint="e.g. dh resume SESSION --world postgres --url URL")
    lease = None
    from ..worlds.live_world import resume_world  # --world, else the configured world

    world_name = resume_world(world_name)
    if world_name:  # held in the world for the whole resume: one machine at a time
        from ..worlds.takeover import before_resume

        claimed = before_resume(world_name, session, url, steal, wait, lease_epoch, output.note)
        session, lease = _pull(world, world_name, session, url, lease_ttl, claimed)
        if claimed is not None:
            from ..worlds.takeover import record_takeover

            record_takeover(world, session, lease, "dh resume --steal" if steal else "dh worker")
    failure = None
    try:
        live = dict(world=world_name, url=url, ttl=lease_ttl, lease=lease) if world_name else {}
        _resume(world, session, prompt, cwd, bool(world_name), stall_timeout, max_restarts,
                tool_grace, replay, no_supervise, workspace, live)
    except typer.Exit:
        raise
    except BaseException as exc:  # failed before its supervisor ran: the session is not ended
        failure = exc
        raise
    finally:
        if lease is not None:
            from ..worlds.takeover import end_hold

            end_hold(world, lease, session, failure, claimed=lease_epoch is not None)


def _resume(world, session, prompt, cwd, rehome, stall_timeout, max_restarts, tool_grace,
            replay, no_supervise, workspace=None, live=None) -> None:
    found = world.find_session(session)
    opts = _options(stall_timeout, max_restarts, tool_grace, replay, supervise=not no_supervise,
                    **(live or {}))
    if workspace not in (None, "keep", "restore"):
        raise UsageError(f"bad --workspace value {workspace!r}", hint="use keep or restore")
    from ..workspace.resume import prepare_cwd  # restores the files of the last step if needed

    here = place(world, found.id)  # a session from a world runs where the user is (confine.py)
    prepare_cwd(world, found, cwd, here[1] if here else None, workspace, output.note)
    raise typer.Exit(resume_session(world, found, prompt, opts, move_to=cwd, rehome=rehome))


def _pull(world, world_name: str, ref: str, url: str | None, ttl=None, adopt_epoch=None):
    from ..worlds.lease import hold_and_pull

    session_id, added, shown, lease = hold_and_pull(world, world_name, ref, url, ttl, adopt_epoch)
    if added is not None:
        output.note(f"dh: pulled session {session_id} from {shown} ({added} record(s) added)")
    return session_id, lease
