"""`dh run` and `dh resume`: thin commands over the supervisor."""

from __future__ import annotations

import os
from functools import partial
from typing import Annotated, Optional

import typer

from .. import output
from ..confine import place
from ..errors import NativeStateError, UsageError
from ..wrappers.replay import parse_overrides
from ..resume.grants import granting
from ..resume.plan import resume_session, start_run
from ..supervisor.launch import default_env
from ..supervisor.policy import PolicyConfig
from ..supervisor.spec import RunOptions
from .. import team
from ..team.resume_world import ResumeAsk, resume_with_worlds
from ..worlds.local import LocalWorld
from .args import HarnessArg, SessionArg

StallOpt = Annotated[Optional[float], typer.Option("--stall-timeout", help="Seconds without progress during an open turn before dh treats the harness as hung")]
RestartsOpt = Annotated[Optional[int], typer.Option("--max-restarts", help="Restarts before dh gives up (FATAL) (default 5, or the config file)")]
GraceOpt = Annotated[Optional[float], typer.Option("--tool-grace", help="Seconds a tool command may run on after the harness died (default 3, or the config file)")]
ReplayOpt = Annotated[Optional[list[str]], typer.Option("--replay", help="TOOL=safe|never: how a cut-off call of TOOL is reported")]
WorldOpt = Annotated[Optional[str], typer.Option("--world", help=f"Replicate the session live to this team world and hold its lease there: {team.listed()} (default: the config's world, DH_WORLD, or $WORKFLOW_TARGET_WORLD set to @workflow/world-postgres)")]
UrlOpt = Annotated[Optional[str], typer.Option("--url", help=team.URL_HELP)]
LeaseTtlOpt = Annotated[Optional[float], typer.Option("--lease-ttl", help="Seconds the session's lease in the world lives without a heartbeat (default 15, or the config's lease_ttl)")]
LeaseEpochOpt = Annotated[Optional[int], typer.Option("--lease-epoch", hidden=True, help="(dh worker) the epoch it claimed for this resume")]
OnLimitOpt = Annotated[Optional[str], typer.Option("--on-limit", help="wait|stop: when the provider refuses the turn for a usage or rate limit, wait for its reset and go on (default), or stop")]
GrantOpt = Annotated[Optional[str], typer.Option("--grant", help="ask|edits|auto|all: let a session from elsewhere run here with up to this much permission, adding the harness's own flags for it where local_flags grant less")]
PromptOpt = Annotated[Optional[str], typer.Option("--prompt", help="The prompt sent on resume (default: continue where it left off)")]


def _options(stall, restarts, grace, replay, supervise=True, world=None, url=None, ttl=None,
             lease=None, adopt_epoch=None, on_limit=None, grant=None) -> RunOptions:
    """Flags given on the command line win over the environment, the config file and the
    defaults (None means "not given"); see dh_cli/config.py."""
    flags = {"stall_timeout": stall, "restart.max_restarts": restarts, "tool_grace": grace,
             "on_limit": on_limit}
    flags.update({f"replay.{tool}": cls for tool, cls in parse_overrides(replay or []).items()})
    from ..config import load as load_config  # pydantic: imported by the commands that need it

    s = load_config(flags).settings
    policy = PolicyConfig(max_restarts=s.restart.max_restarts, start_secs=s.restart.start_secs,
                          backoff_cap=s.restart.backoff_cap, limit_spacing=s.limit_spacing,
                          limit_cap=max(s.limit_spacing, PolicyConfig.limit_cap),
                          limit_max_wait=s.limit_max_wait)
    return RunOptions(cwd=os.getcwd(), env=default_env(),
                      stall_timeout=s.stall_timeout or None, tool_grace=s.tool_grace,
                      replay=dict(s.replay), continue_prompt=s.continue_prompt, policy=policy,
                      supervise=supervise, on_limit=s.on_limit, notice=output.note,
                      local_flags=granting(s.local_flags, grant, dict(os.environ)),
                      link=_link(s, world, url, ttl, lease, adopt_epoch))


def _link(settings, world, url, ttl, lease, adopt_epoch):
    from ..team.live_world import link_for  # a world's client library loads only for a live world

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
    on_limit: OnLimitOpt = None,
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
                    ttl=lease_ttl, on_limit=on_limit)
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
    world_name: Annotated[Optional[str], typer.Option("--world", help=f"Pull the session from this team world first ({team.listed()}); it then replicates live under its lease. `local`: this machine's copy (one that replicated to a world goes on as a new session forked from it)")] = None,
    url: UrlOpt = None,
    cwd: Annotated[Optional[str], typer.Option("--cwd", help="Move the session to this checkout and resume it there")] = None,
    workspace: Annotated[Optional[str], typer.Option("--workspace", help="keep|restore: when the checkout differs from the session's last workspace snapshot (default: ask on a terminal, keep without one)")] = None,
    lease_ttl: LeaseTtlOpt = None,
    steal: Annotated[bool, typer.Option("--steal", help="With --world: end another holder's live lease (the epoch moves on, its writes are refused) instead of refusing")] = False,
    wait: Annotated[Optional[float], typer.Option("--wait", help="With --world: wait up to this many seconds for another holder's lease to end")] = None,
    lease_epoch: LeaseEpochOpt = None,
    on_limit: OnLimitOpt = None,
    at_reset: Annotated[bool, typer.Option("--at-reset", help="A session stopped on a provider's limit: wait for the reset dh recorded, then resume")] = False,
    grant: GrantOpt = None,
) -> None:
    """Resume a session from the log: restore its native state, repair the cut step, relaunch.

    Example:
      $ dh resume 1m8k6p
      $ dh resume 1m8k6p --prompt "finish the refactor" --no-supervise
      $ dh resume 1m8k6p --world postgres --cwd ~/src/app
    """
    if url and not world_name:
        raise UsageError("--url needs --world", hint="e.g. dh resume SESSION --world postgres --url URL")
    ask = ResumeAsk(session, world_name, url, prompt, cwd, steal, wait, lease_ttl, lease_epoch, at_reset)
    options = partial(_options, stall_timeout, max_restarts, tool_grace, replay,
                      supervise=not no_supervise, on_limit=on_limit, grant=grant)
    world = LocalWorld()
    raise typer.Exit(resume_with_worlds(world, ask, options, _relaunch(world, prompt, cwd, workspace),
                                        output.note))


def _note_recache(world, session) -> None:
    """Information, never a question: what the resume will likely write to the provider's
    cache again, when the session's last call is older than that cache lives."""
    import time

    from ..logviews.render import money, tokens_k
    from ..logviews.resumecost import likely_recache
    from ..supervisor.waiting import span

    likely = likely_recache(world, session.id, session.harness, int(time.time() * 1000))
    if likely:
        output.note(f"dh: the last model call of session {session.id} was {span(likely['age'])} ago, past "
                    f"its prompt cache ({span(likely['ttl'])}): this resume will likely write about "
                    f"{tokens_k(likely['tokens'])} tokens to the cache again ({money(likely['usd'])})")


def _relaunch(world, prompt, cwd, workspace):
    """The local resume of a session that is in this log (pulled first or not): restore its
    checkout, relaunch the harness; its exit code."""

    def run(ref: str, opts: RunOptions, rehome: bool) -> int:
        found = world.find_session(ref)
        if workspace not in (None, "keep", "restore"):
            raise UsageError(f"bad --workspace value {workspace!r}", hint="use keep or restore")
        from ..workspace.resume import prepare_cwd  # restores the files of the last step if needed

        _note_recache(world, found)
        here = place(world, found.id)  # a session from a world runs where the user is (confine.py)
        prepare_cwd(world, found, cwd, here[1] if here else None, workspace, output.note)
        return resume_session(world, found, prompt, opts, move_to=cwd, rehome=rehome)

    return run
