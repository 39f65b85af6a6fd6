"""Multi-node servers (`--nnodes N --node-rank R --dist-init-addr HOST:PORT`), as SGLang runs them.

Rank 0 opens the rendezvous at `--dist-init-addr` (torch.distributed's TCPStore) and waits until the other
N-1 ranks have joined before it loads anything; each other rank connects to it (retrying until rank 0
listens), then runs no tokenizer and no HTTP API, only SGLang's dummy health server on its `--port`
(`/health` and `/health_generate` answer 200; `entrypoints/engine.py`, `launch_dummy_health_check_server`).
A rank whose rendezvous peer goes away exits, as a NCCL group does when a member dies. With `--use-ray`
SGLang's scheduler actors form the group, so the one process started waits for nobody.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable

from service.emulator.args import ServerArgs

JOIN_RETRY_S = 0.2


def node_layout(args: ServerArgs) -> tuple[int, int, tuple[str, int] | None]:
    """(nnodes, node_rank, rendezvous host and port) from the parsed argv."""
    nnodes = int(args.get("nnodes", 1) or 1)
    rank = int(args.get("node_rank", 0) or 0)
    addr = args.get("dist_init_addr")
    if nnodes <= 1 or not addr:
        return nnodes, rank, None
    host, _, port = str(addr).rpartition(":")
    return nnodes, rank, (host, int(port))


def _watch(peers: list[socket.socket], log: Callable[[str], None], who: str) -> None:
    """Exit the process when a rendezvous peer closes its connection (a member of the group died)."""
    def wait(peer: socket.socket) -> None:
        try:
            while peer.recv(64):
                pass
        except OSError:
            pass
        log(f"{who} left the distributed group; exiting")
        os._exit(1)

    for peer in peers:
        threading.Thread(target=wait, args=(peer,), daemon=True).start()


def rendezvous(args: ServerArgs, log: Callable[[str], None]) -> None:
    """Join the server's distributed group: rank 0 waits for every other rank; the others join rank 0."""
    nnodes, rank, where = node_layout(args)
    if where is None:
        return
    if args.get("use_ray"):
        log(f"Ray launcher: nnodes={nnodes}; the scheduler actors join their group themselves")
        return
    log(f"Init torch distributed begin. nnodes={nnodes}, node_rank={rank}, dist_init_addr={where[0]}:{where[1]}")
    if rank == 0:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(where)
        listener.listen(nnodes)
        peers = [listener.accept()[0] for _ in range(nnodes - 1)]
        for peer in peers:
            peer.sendall(b"ready\n")
        _watch(peers, log, "a node rank")
    else:
        while True:
            try:
                peer = socket.create_connection(where, timeout=5.0)
                break
            except OSError:
                time.sleep(JOIN_RETRY_S)
        peer.settimeout(None)
        peer.recv(16)
        _watch([peer], log, "node rank 0")
    log("Init torch distributed ends.")
