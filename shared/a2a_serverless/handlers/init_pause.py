"""Imported first by a function module (before its own imports): starts the init pause of
`a2a_serverless.handlers` (the cyclic GC off during a function's init, until its create()
calls `init_done()`). A no-op unless a function's entry code is being imported (Lambda,
loopback_server): tests, tools and the local stack importing a function keep their GC."""

from a2a_serverless.handlers import pause_for_init

pause_for_init()
