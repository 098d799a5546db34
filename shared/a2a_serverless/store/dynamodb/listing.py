"""ListTasks on DynamoDB: pages of an owner's tasks from the sparse owner index, exact counts
from the counters the task log maintains (with, for a context, the header of the task that
opened it), from COUNT queries on the index by time (the smaller side of it) or for a context
and a state together."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import a2a_serverless.store.dynamodb.keys as keys
from a2a_serverless.models import (
    INTERRUPTED_STATES,
    TERMINAL_STATES,
    TaskState,
    format_timestamp,
)
from a2a_serverless.store.base import ListedContents, ListQuery, TaskRecord
from a2a_serverless.store.dynamodb.keys import s
from a2a_serverless.store.dynamodb.table import DynamoDBTable
from a2a_serverless.store.fold import fold_events

# Events after the last status change (chunks) are not counted on the header: probe for them
# in doubling windows, wide for a live task, one key for a settled one.
LIVE_PROBE = 8
SETTLED_PROBE = 1


class DynamoDBTaskListing(DynamoDBTable):
    """The TaskListing on the table."""

    # Index entries a filtered page may examine, so a huge owner's filtered listing ends well
    # within API Gateway's 29 s; past it the page is short and its token resumes there.
    filtered_page_max_examined = 10_000

    # Index entries a COUNT Query examines per call at most (DynamoDB stops at 1 MB first).
    count_page_entries = 5_000

    # Where a read of a context's entries can stop (`_context_floor`): none is older than the
    # opening task's creation or the counter's `since`, less this margin for clock skew.
    context_floor_margin = timedelta(minutes=1)

    def _list_kwargs(
        self, query: ListQuery, before: bool = False, floor: str | None = None
    ) -> dict[str, Any]:
        """Query arguments for the owner's index range (from `status_after` on, or up to it when
        `before`; from `floor` on unless `before`), with context and state as filters."""
        values: dict[str, Any] = {":p": s(query.owner)}
        condition = f"{keys.INDEX_PARTITION} = :p"
        # Sort keys are `{status time}#{task id}`: every key of a time or later is >= the
        # bare time.
        after = keys.status_at_or_after(query.status_after) if query.status_after else None
        if before and after is not None:
            values[":after"] = s(after)
            condition += f" AND {keys.INDEX_SORT} < :after"
        elif after is not None or floor is not None:
            values[":after"] = s(max(b for b in (after, floor) if b is not None))
            condition += f" AND {keys.INDEX_SORT} >= :after"
        kwargs: dict[str, Any] = {
            "IndexName": keys.INDEX_BY_OWNER,
            "KeyConditionExpression": condition,
            "ExpressionAttributeValues": values,
        }
        found = keys.list_filter(query)
        if found is not None:
            expression, names, filter_values = found
            kwargs["FilterExpression"] = expression
            kwargs["ExpressionAttributeNames"] = names
            values.update(filter_values)
        return kwargs

    def list_tasks(self, query: ListQuery) -> tuple[list[TaskRecord], str | None]:
        """One page, newest status first, and the next page's token (None on the last page).

        The token is the last task's index position; InvalidPageToken if it is not one we
        issued."""
        kwargs = self._list_kwargs(query)
        if query.page_token:
            cursor = keys.decode_page_token(query.page_token)
            kwargs["ExclusiveStartKey"] = keys.start_key(query, cursor)
        want = query.page_size + 1  # one more tells whether another page exists
        narrowed = None
        if query.context_id is not None:

            def narrowed() -> dict[str, Any] | None:
                floor = self._context_floor(query)
                return None if floor is None else self._list_kwargs(query, floor=floor)

        items, stopped_at = self._read_page(kwargs, want, narrowed)
        page_items = items[: query.page_size]
        token = None
        if len(items) > query.page_size and page_items:
            token = keys.encode_page_token(keys.cursor_of(page_items[-1]))
        elif stopped_at is not None:  # the budget ran out before the page was full
            token = keys.encode_page_token(keys.cursor_of_key(stopped_at))
        records = [keys.record_of(i) for i in page_items]
        for record, item in zip(records, page_items, strict=True):
            record.page_cursor = keys.encode_page_token(keys.cursor_of(item))
        return records, token

    def _read_page(
        self,
        kwargs: dict[str, Any],
        want: int,
        narrowed: Callable[[], dict[str, Any] | None] | None = None,
    ) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
        """Up to `want` index entries that pass the filters, newest first, and the key the read
        stopped at when `filtered_page_max_examined` ran out first (else None). `narrowed()` may
        give the same query over a shorter range once the first Query leaves the page unfilled."""
        items: list[dict[str, Any]] = []
        examined = 0
        limit = want
        while True:
            response = self._db.query(
                TableName=self._table, ScanIndexForward=False, Limit=limit, **kwargs
            )
            items.extend(response.get("Items", []))
            examined += response.get("ScannedCount", 0)
            last = response.get("LastEvaluatedKey")
            if len(items) >= want or last is None:
                return items, None
            remaining = self.filtered_page_max_examined - examined
            if remaining <= 0:
                return items, last
            if narrowed is not None:
                narrower, narrowed = narrowed(), None
                if narrower is not None:
                    start = narrower["ExpressionAttributeValues"][":after"]["S"]
                    if last[keys.INDEX_SORT]["S"] < start:
                        return items, None  # read past where the range starts: no more
                    kwargs = narrower
            kwargs = {**kwargs, "ExclusiveStartKey": last}
            limit = min(limit * 4, remaining)

    def read_listed(
        self, records: list[TaskRecord], include_artifacts: bool, history_length: int
    ) -> list[ListedContents]:
        """Artifacts and recent history of a page's tasks by BatchGetItem, never a read per task:
        keys come from each header's `hcount` and `statusSeq`, plus probes for later events.
        Rounds: one for history and headers, one for events, one per window that came back full."""
        wanted: list[dict[str, Any]] = []
        from_first: set[str] = set()  # tasks whose wanted history starts at the first message
        for record in records:
            if history_length > 0:
                first = max(1, record.history_count - history_length + 1)
                wanted += [
                    keys.task_key(record.task_id, keys.history_sk(i))
                    for i in range(first, record.history_count + 1)
                ]
                if first == 1:
                    from_first.add(record.task_id)  # which the header may hold
            if include_artifacts or record.task_id in from_first:
                wanted.append(keys.task_key(record.task_id, keys.HEADER))
        by_task: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for item in self._batch_get(wanted):
            by_task[item["pk"]["S"]].append(item)
        events: dict[str, list[dict[str, Any]]] = defaultdict(list)
        if include_artifacts:
            events = self._listed_events(records, by_task)
        contents = []
        for record in records:
            items = by_task[keys.task_pk(record.task_id)["S"]]
            header = next((i for i in items if keys.is_header(i)), None)
            history = keys.history_of(header if record.task_id in from_first else None, items)
            chunks = sorted(events[record.task_id], key=keys.seq_of)
            _, artifacts = fold_events(keys.event_of(i) for i in chunks if _is_artifact(i))
            contents.append(ListedContents(artifacts=artifacts, history=history))
        return contents

    def _listed_events(
        self, records: list[TaskRecord], by_task: dict[str, list[dict[str, Any]]]
    ) -> dict[str, list[dict[str, Any]]]:
        """Every event of each record's task: 1..statusSeq, then probe windows until one
        comes back short."""
        # task id -> (first seq to ask for, last seq known to exist, probe width)
        plan: dict[str, tuple[int, int, int]] = {}
        for record in records:
            header = next(
                (i for i in by_task[keys.task_pk(record.task_id)["S"]] if keys.is_header(i)), None
            )
            if header is None:  # expired between the index read and this one
                continue
            status_seq = int(header.get("statusSeq", {"N": "0"})["N"])
            state = TaskState(header["state"]["S"])  # the header's: the index may lag
            settled = state in TERMINAL_STATES or state in INTERRUPTED_STATES
            plan[record.task_id] = (1, status_seq, SETTLED_PROBE if settled else LIVE_PROBE)
        found: dict[str, list[dict[str, Any]]] = defaultdict(list)
        while plan:
            wanted = [
                keys.task_key(task_id, keys.event_sk(seq))
                for task_id, (first, known, probe) in plan.items()
                for seq in range(first, known + probe + 1)
            ]
            highest: dict[str, int] = {}
            for item in self._batch_get(wanted):
                task_id = item["pk"]["S"].removeprefix(keys.TASK_PREFIX)
                found[task_id].append(item)
                highest[task_id] = max(highest.get(task_id, 0), keys.seq_of(item))
            # A window that came back full may have more behind it: the next, twice as wide.
            plan = {
                task_id: (known + probe + 1, known + probe, probe * 2)
                for task_id, (_, known, probe) in plan.items()
                if highest.get(task_id, 0) >= known + probe
            }
        return found

    def count_tasks(self, query: ListQuery) -> int:
        """Exact count: maintained counters (the owner's shards: all and per state; a
        context's: all); by time, the smaller side of it (`_count_since`); a COUNT query on the
        index when filtered by context and state together (no counter holds that)."""
        if query.context_id is not None and query.state is not None:
            floor = self._context_floor(query)
            return self._count_entries(self._list_kwargs(query, floor=floor))
        if query.status_after is not None:
            return self._count_since(query)
        return self._counted(query)

    def _count_entries(self, kwargs: dict[str, Any]) -> int:
        return sum(count for count, _ in self._counting(kwargs, self.count_page_entries))

    def _count_since(self, query: ListQuery) -> int:
        """Tasks whose status time is at or after `status_after`: the index entries from then on,
        or the counters minus the entries before it, whichever side ends first (read in turn,
        each call examining four times as many), so it costs a few times the smaller side."""
        since = self._counting(self._list_kwargs(query), query.page_size + 1)
        before = self._counting(self._list_kwargs(query, before=True), query.page_size + 1)
        counted_since = counted_before = 0
        while True:
            count, more = next(since)
            counted_since += count
            if not more:
                return counted_since
            count, more = next(before)
            counted_before += count
            if not more:
                return max(0, self._counted(replace(query, status_after=None)) - counted_before)

    def _counting(self, kwargs: dict[str, Any], first: int) -> Iterator[tuple[int, bool]]:
        """(entries counted, whether the range goes on) per COUNT call, to the range's end:
        `first` entries examined by the first call, four times as many by each next,
        `count_page_entries` at most."""
        limit = min(first, self.count_page_entries)
        while True:
            response = self._db.query(TableName=self._table, Select="COUNT", Limit=limit, **kwargs)
            last = response.get("LastEvaluatedKey")
            yield response.get("Count", 0), last is not None
            if last is None:
                return
            kwargs = {**kwargs, "ExclusiveStartKey": last}
            limit = min(limit * 4, self.count_page_entries)

    def _counted(self, query: ListQuery) -> int:
        """From the counters: the owner's shards (all, or the state's), or the context's."""
        if query.context_id is not None:
            return self._count_context(query)
        name = "all" if query.state is None else keys.state_counter(query.state)
        shards = self._query_all(
            KeyConditionExpression="pk = :pk AND begins_with(sk, :n)",
            ExpressionAttributeValues={
                ":pk": keys.owner_pk(query.owner),
                ":n": s(keys.OWNER_SHARD_PREFIX),
            },
            ConsistentRead=True,
        )
        return max(0, sum(int(i.get(name, {"N": "0"})["N"]) for i in shards))

    def _context_items(
        self, query: ListQuery
    ) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """The header of the task that opened the context when it is the caller's
        (`_opened`), else None, and the owner's counter of the context: one consistent
        BatchGetItem, read once per ListTasks call (its page's floor and its count need both)."""
        if query.context_read is None:
            context_id = query.context_id or ""
            counter_key = {
                "pk": keys.owner_pk(query.owner),
                "sk": s(keys.context_counter_sk(context_id)),
            }
            opener = counter = None
            for item in self._batch_get([counter_key, keys.task_key(context_id, keys.HEADER)]):
                if item["pk"] == counter_key["pk"]:
                    counter = item
                elif _opened(item, query.owner, context_id):
                    opener = item
            query.context_read = (opener, counter)
        return query.context_read

    def _context_floor(self, query: ListQuery) -> str | None:
        """The lowest index sort key a task of the context can have, less `context_floor_margin`:
        the opening task's creation time when the owner holds it, else the counter's
        `keys.context_since`; None when neither says."""
        opener, counter = self._context_items(query)
        if opener is not None:
            since = opener.get("createdAt", {}).get("S")
        else:
            since = None if counter is None else keys.context_since(counter)
        if since is None:
            return None
        try:
            return format_timestamp(datetime.fromisoformat(since) - self.context_floor_margin)
        except (ValueError, OverflowError):  # odd stored data: no floor, the whole index
            return None

    def _count_context(self, query: ListQuery) -> int:
        """The context's counter (the tasks that joined it) and, when it is the caller's, the
        task that opened it (`keys.opens_context`: its id is the context's)."""
        opener, counter = self._context_items(query)
        joined = 0 if counter is None else int(counter.get("all", {"N": "0"})["N"])
        return max(0, joined) + int(opener is not None)


def _opened(header: dict[str, Any], owner: str, context_id: str) -> bool:
    """Whether a task header (read at `T#{contextId}`) is of the task that opened the context
    for this owner: the owner's, in that context (`keys.opens_context`)."""
    return header.get("owner") == s(owner) and header.get("contextId") == s(context_id)


def _is_artifact(item: dict[str, Any]) -> bool:
    return bool(item.get("kind", {}).get("S") == "artifact")
