"""The bounds on caller-chosen values, in one place (README "Input bounds" lists them all).

Sizes are UTF-8 bytes unless a name says CHARS. Core operations check them before any write
and refuse with InvalidParams naming the field, so every binding answers alike. Part content
(text, raw, data) is bounded by the request body limit (the setting MAX_BODY_BYTES) and stored
in the content bucket when large (store/content.py); a message's other fields by
`MAX_MESSAGE_FRAME_BYTES`.
"""

from __future__ import annotations

# -- ids that become parts of storage keys (store/dynamodb/keys.py checks they fit) ----------
MAX_ID_BYTES = 256  # messageId, contextId, taskId, referenceTaskIds[i]
MAX_OWNER_BYTES = 384  # the authenticated principal (an IAM role session ARN is ~160)
MAX_TENANT_CHARS = 64  # one URL path segment of unreserved characters

# -- a message ---------------------------------------------------------------------------------
MAX_REQUEST_METADATA_BYTES = 65_536  # SendMessageRequest.metadata as JSON (execution input)
MAX_REFERENCE_TASK_IDS = 64  # message.referenceTaskIds entries
MAX_MESSAGE_EXTENSIONS = 32  # message.extensions entries
MAX_EXTENSION_URI_BYTES = 2048  # each message.extensions URI
MAX_PART_URL_BYTES = 8192  # a file part's url (pre-signed URLs run long; servers' 8 KB line)
MAX_PART_FILENAME_BYTES = 1024
MAX_PART_MEDIA_TYPE_BYTES = 256  # RFC 6838: type and subtype up to 127 characters each
MAX_MESSAGE_PARTS = 1024  # each may become one stored object (one S3 PUT)
# A message as JSON without its parts' content: what stays in its item however much is stored.
MAX_MESSAGE_FRAME_BYTES = 262_144

# -- a push notification config (its url and header values go out with every delivery) --------
MAX_PUSH_CONFIG_ID_CHARS = 128  # a sort key part: at most 512 bytes
MAX_PUSH_URL_BYTES = 2048  # what browsers and API Gateway practice keep URLs within
MAX_PUSH_TOKEN_BYTES = 4096  # X-A2A-Notification-Token
MAX_AUTH_SCHEME_BYTES = 64  # the Authorization header's scheme (Bearer, Basic, ...)
MAX_AUTH_CREDENTIALS_BYTES = 4096
# url, token and Authorization value together: a delivery stays under API Gateway's 10,240 bytes
# of request line and headers, each header line under the 8 KB nginx and Apache accept.
MAX_WEBHOOK_HEAD_BYTES = 8192

# -- queries -----------------------------------------------------------------------------------
MAX_PAGE_TOKEN_BYTES = 4096  # a ListTasks pageToken (the ones issued are ~150 bytes)

# -- what a flow writes, and DynamoDB's item limits (README "Flow and storage bounds") ---------
# The store refuses an item past these before writing anything (store.TooLarge, naming it).
DYNAMODB_ITEM_BYTES = 400 * 1024  # DynamoDB's item limit: attribute names plus values
DYNAMODB_TRANSACTION_BYTES = 4 * 1024 * 1024  # all the items of one TransactWriteItems
# The largest item the store writes: a margin under DynamoDB's limit for the rounding of its
# size rules (numbers are "approximately" sized).
MAX_ITEM_BYTES = 384 * 1024
MAX_FLOW_STATE_BYTES = 65_536  # a flow's ctx.state as stored JSON (the task header holds it)
MAX_STATUS_MESSAGE_BYTES = 65_536  # the message a step ends its turn with, as JSON (header too)
MAX_EVENT_BYTES = 380 * 1024  # one event as JSON: an artifact chunk or a progress status


def utf8_size(value: str) -> int:
    """A string's size as DynamoDB and the bounds measure it: UTF-8 bytes."""
    return len(value.encode("utf-8", "surrogatepass"))
