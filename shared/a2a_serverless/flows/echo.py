"""The default flow: deterministic, streams its reply, and obeys directives in the text.

Directives: [input] and [auth] interrupt the task (the answer completes it, unless it says
[input] again); [fail], [reject] end it so; [crash] raises in the step; [slow=S] spreads the
reply over S seconds; [steps=N] uses N steps, one chunk each; [whoami] replies with the
caller's principal; [reply] answers with a direct Message (no task). Otherwise the reply is
"Echo: <text>" in chunks of one artifact, upper-cased under UPPERCASE_EXTENSION. Across
[input] turns the state keeps only the last MAX_KEPT_CHARS characters of the conversation.
"""

from __future__ import annotations

import re
import time

from a2a_serverless.flows.base import Flow, Outcome, ReplyContext, StepContext
from a2a_serverless.models import AgentExtension, AgentSkill

UPPERCASE_EXTENSION = "urn:a2a-serverless:echo:uppercase:v1"
_SLOW = re.compile(r"\[slow=(\d+(?:\.\d+)?)\]")
_STEPS = re.compile(r"\[steps=(\d+)\]")
MAX_SLOW_SECONDS = 600.0
MAX_STEPS = 50
# At most 6 bytes of JSON a character (a control character's escape): 48,000 bytes of state.
MAX_KEPT_CHARS = 8_000


def _tail(text: str) -> str:
    """The last MAX_KEPT_CHARS characters of `text`, "…" first when some were dropped."""
    if len(text) <= MAX_KEPT_CHARS:
        return text
    return "…" + text[len(text) - MAX_KEPT_CHARS + 1 :]


def _slices(text: str, count: int) -> list[str]:
    """Split into `count` nearly equal character runs (for slow replies worth watching)."""
    count = max(1, min(count, len(text)))
    size = -(-len(text) // count)
    return [text[i : i + size] for i in range(0, len(text), size)]


def _chunks(text: str, count: int) -> list[str]:
    """Split into at most `count` pieces at word boundaries, keeping every character."""
    words = re.findall(r"\S+\s*", text) or [text]
    size = max(1, -(-len(words) // count))
    return ["".join(words[i : i + size]) for i in range(0, len(words), size)]


class EchoFlow(Flow):
    name = "echo"
    title = "Echo Agent"
    description = "Echoes what it is sent, as a streamed artifact (a2a-serverless)."
    skills = [
        AgentSkill(
            id="echo",
            name="Echo",
            description=(
                "Replies 'Echo: <your text>' as a streamed artifact. Directives: [input], "
                "[auth], [fail], [reject], [crash], [slow=SECONDS], [steps=N]."
            ),
            tags=["echo", "test"],
            examples=["hello", "hello [input]", "count slowly [slow=5]"],
        )
    ]
    # Shown to signed-in callers only (the extended Agent Card).
    extended_skills = [
        AgentSkill(
            id="whoami",
            name="Who am I",
            description="Replies with the principal this agent knows you as, and how you "
            "signed in ([whoami]).",
            tags=["auth"],
            examples=["[whoami]"],
        )
    ]
    extensions = [
        AgentExtension(
            uri=UPPERCASE_EXTENSION,
            description="Replies in upper case (send this URI in the A2A-Extensions header).",
            required=False,
        )
    ]
    input_modes = ["text/plain", "application/json"]
    output_modes = ["text/plain"]

    def reply(self, ctx: ReplyContext) -> str | None:
        if "[reply]" not in ctx.text:
            return None
        reply = f"Echo: {ctx.text}"
        return reply.upper() if UPPERCASE_EXTENSION in ctx.extensions else reply

    def step(self, ctx: StepContext) -> Outcome:
        if ctx.step == 0:
            return self._first_step(ctx)
        return self._next_chunk(ctx)

    def _first_step(self, ctx: StepContext) -> Outcome:
        text = ctx.text
        pending = ctx.state.get("awaiting")
        if pending == "input":
            combined = f"{ctx.state.get('original', '')} + {text}"
            if "[input]" in text:  # asked again: one more interruption of the same task
                ctx.state.update(awaiting="input", original=_tail(combined))
                return Outcome.input_required("What else should I add to the echo?")
            ctx.state["awaiting"] = None
            return self._echo(ctx, combined)
        if pending == "auth":
            ctx.state["awaiting"] = None
            return self._echo(ctx, ctx.state.get("original", ""))
        if "[whoami]" in text:
            caller = ctx.caller
            scopes = f", scopes: {' '.join(caller.scopes)}" if caller.scopes else ""
            return self._echo(ctx, f"You are {caller.principal} ({caller.scheme}{scopes})")
        if "[crash]" in text:
            raise RuntimeError("echo flow crashed on request ([crash])")
        if "[fail]" in text:
            return Outcome.failed("Failing as asked ([fail]).")
        if "[reject]" in text:
            return Outcome.rejected("Rejecting as asked ([reject]).")
        if "[input]" in text:
            ctx.state.update(awaiting="input", original=_tail(text))
            return Outcome.input_required("What should I add to the echo?")
        if "[auth]" in text:
            ctx.state.update(awaiting="auth", original=_tail(text))
            return Outcome.auth_required("Please authorize, then reply to continue.")
        steps = _STEPS.search(text)
        if steps:
            count = max(1, min(MAX_STEPS, int(steps.group(1))))
            ctx.state.pop("chunks", None)  # the reply is made again at each step
            ctx.state.update(steps=count, sent=0)
            return self._next_chunk(ctx)
        return self._echo(ctx, text)

    def _echo(self, ctx: StepContext, text: str) -> Outcome:
        slow = _SLOW.search(text)
        delay_total = min(MAX_SLOW_SECONDS, float(slow.group(1))) if slow else 0.0
        reply = f"Echo: {text}"
        upper = UPPERCASE_EXTENSION in ctx.extensions
        if upper:
            reply = reply.upper()
        # Slow replies send about two chunks a second, so watchers see them arrive.
        pieces = _slices(reply, max(4, int(delay_total * 2))) if slow else _chunks(reply, 4)
        for index, piece in enumerate(pieces):
            if delay_total:
                time.sleep(delay_total / len(pieces))
            ctx.artifact(
                piece,
                artifact_id="echo",
                name="echo",
                append=index > 0,
                last_chunk=index == len(pieces) - 1,
                extensions=[UPPERCASE_EXTENSION] if upper else None,
            )
        return Outcome.completed()

    def _next_chunk(self, ctx: StepContext) -> Outcome:
        # From the turn's message (every step sees it); `chunks` in the state of a turn begun
        # before the state held the count only.
        chunks: list[str] = ctx.state.get("chunks") or _chunks(
            f"Echo: {ctx.text}", int(ctx.state.get("steps", 1))
        )
        sent: int = ctx.state.get("sent", 0)
        if sent < len(chunks):
            ctx.artifact(
                chunks[sent],
                artifact_id="echo",
                name="echo",
                append=sent > 0,
                last_chunk=sent == len(chunks) - 1,
            )
            ctx.state["sent"] = sent + 1
        if ctx.state["sent"] < len(chunks):
            return Outcome.next_step()
        return Outcome.completed()


flow = EchoFlow()
