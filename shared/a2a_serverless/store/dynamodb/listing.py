"""ListTasks on DynamoDB: pages of an owner's tasks from the sparse GSIs, exact counts from
the counters the task log maintains (or a COUNT query when filtered by time)."""

from __future__ import annotations

from typing import Any

from a2a_serverless.models import format_timestamp
from a2a_serverless.store import keys
from a2a_serverless.store.base import ListQuery, TaskRecord
from a2a_serverless.store.dynamodb.table import DynamoDBTable
from a2a_serverless.store.keys import s


class DynamoDBTaskListing(DynamoDBTable):
    """The TaskListing on the table."""

    def _list_kwargs(self, query: ListQuery) -> dict[str, Any]:
        index, partition, state_filter = keys.index_for(query)
        values: dict[str, Any] = {":p": s(partition)}
        condition = f"{keys.INDEX_PARTITION[index]} = :p"
        if query.status_after is not None:
            # "~" sorts after "#", so equal timestamps are excluded: strictly after.
            values[":after"] = s(format_timestamp(query.status_after) + "~")
            condition += f" AND {keys.INDEX_SORT} > :after"
        kwargs: dict[str, Any] = {
            "IndexName": index,
            "KeyConditionExpression": condition,
            "ExpressionAttributeValues": values,
        }
        if state_filter is not None:
            kwargs["FilterExpression"] = "#st = :st"
            kwargs["ExpressionAttributeNames"] = {"#st": "state"}
            values[":st"] = s(state_filter)
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
        items: list[dict[str, Any]] = []
        for page in self._pages(
            ScanIndexForward=False, PaginationConfig={"MaxItems": want, "PageSize": want}, **kwargs
        ):
            items.extend(page.get("Items", []))
        page_items = items[: query.page_size]
        token = None
        if len(items) > query.page_size and page_items:
            token = keys.encode_page_token(keys.cursor_of(page_items[-1]))
        return [keys.record_of(i) for i in page_items], token

    def count_tasks(self, query: ListQuery) -> int:
        """Exact count: maintained counters, or a COUNT query on the index range."""
        if query.status_after is not None:
            pages = self._pages(Select="COUNT", **self._list_kwargs(query))
            return sum(page.get("Count", 0) for page in pages)
        name = "all" if query.state is None else keys.state_counter(query.state)
        if query.context_id is not None:
            counter = {
                "pk": keys.owner_pk(query.owner),
                "sk": s(keys.context_counter_sk(query.context_id)),
            }
            shards = [self._get(counter) or {}]
        else:
            shards = self._query_all(
                KeyConditionExpression="pk = :pk AND begins_with(sk, :n)",
                ExpressionAttributeValues={
                    ":pk": keys.owner_pk(query.owner),
                    ":n": s(keys.OWNER_SHARD_PREFIX),
                },
                ConsistentRead=True,
            )
        return max(0, sum(int(i.get(name, {"N": "0"})["N"]) for i in shards))
