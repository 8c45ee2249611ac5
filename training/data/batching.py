"""Adversarial contextual batching (CDE paper 4.1): batches of pairs from one fine-grained pseudo-domain.

Each pair is embedded by a surrogate encoder; K-means over the asymmetric pair vectors q+d and d+q (`+` is
concatenation, FAISS on both points of every pair) groups pairs whose documents are hard negatives of each
other's queries. Clusters are split into batches of B; the pieces left over are merged with their nearest
pieces; batches are ordered by a greedy travelling-salesman tour over their centroids, so consecutive batches
are close too. `random` batching is the baseline: a random permutation cut into batches of B.
"""

from __future__ import annotations

from collections.abc import Sequence

import faiss
import numpy as np

STRATEGIES = ("cluster", "random")
PACKINGS = ("tsp", "random")


def _greedy_tour(points: np.ndarray, start: int = 0) -> list[int]:
    """Nearest-neighbour tour over points (n, d): each step goes to the closest point not yet visited."""
    n = points.shape[0]
    if n == 0:
        return []
    sq = (points**2).sum(1)  # (n,)
    left = np.ones(n, bool)
    tour = [start]
    left[start] = False
    for _ in range(n - 1):
        cur = tour[-1]
        dist = sq - 2.0 * points @ points[cur] + sq[cur]  # (n,)
        dist[~left] = np.inf
        nxt = int(np.argmin(dist))
        tour.append(nxt)
        left[nxt] = False
    return tour


def cluster_pairs(q: np.ndarray, d: np.ndarray, *, cluster_size: int, seed: int) -> np.ndarray:
    """Cluster id of each pair, (N,): K-means on both asymmetric vectors of every pair."""
    n = q.shape[0]
    k = max(1, round(n / cluster_size))
    qd = np.concatenate([q, d], axis=1).astype(np.float32)  # (N, 2d)
    dq = np.concatenate([d, q], axis=1).astype(np.float32)  # (N, 2d)
    points = np.concatenate([qd, dq])  # (2N, 2d)
    if k == 1:
        return np.zeros(n, np.int64)
    # Best of 3 runs, as the paper does; FAISS warns (harmlessly) when there are few points per centroid.
    km = faiss.Kmeans(points.shape[1], k, niter=25, nredo=3, seed=seed, verbose=False, min_points_per_centroid=1)
    km.train(points)
    dist_qd, lab_qd = km.index.search(qd, 1)  # (N, 1)
    dist_dq, lab_dq = km.index.search(dq, 1)  # (N, 1)
    # A pair goes where either of its two points is closest (the metric m of Eq. 3 is symmetric in them).
    return np.where(dist_qd[:, 0] <= dist_dq[:, 0], lab_qd[:, 0], lab_dq[:, 0]).astype(np.int64)


def make_batches(
    q: np.ndarray,
    d: np.ndarray,
    batch_size: int,
    *,
    strategy: str = "cluster",
    packing: str = "tsp",
    cluster_size: int | None = None,
    seed: int = 0,
) -> list[list[int]]:
    """Equal-size batches of pair indices (the remainder, fewer than batch_size pairs, is left out)."""
    if strategy not in STRATEGIES or packing not in PACKINGS:
        raise ValueError(f"strategy must be one of {STRATEGIES} and packing one of {PACKINGS}")
    n = q.shape[0]
    if n < batch_size:
        raise ValueError(f"{n} pairs cannot fill one batch of {batch_size}")
    rng = np.random.default_rng(seed)
    if strategy == "random":
        perm = rng.permutation(n)
        return [perm[i : i + batch_size].tolist() for i in range(0, n - batch_size + 1, batch_size)]
    labels = cluster_pairs(q, d, cluster_size=cluster_size or batch_size, seed=seed)
    pair_vec = np.concatenate([q, d], axis=1)  # (N, 2d)
    full: list[list[int]] = []
    pieces: list[list[int]] = []
    for c in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == c)).tolist()
        cut = len(members) - len(members) % batch_size
        full += [members[i : i + batch_size] for i in range(0, cut, batch_size)]
        if cut < len(members):
            pieces.append(members[cut:])
    # Leftover pieces: walked in tour order (close pieces side by side), concatenated, cut into batches.
    if pieces:
        centroids = np.stack([pair_vec[p].mean(0) for p in pieces])  # (pieces, 2d)
        order = _greedy_tour(centroids) if packing == "tsp" else rng.permutation(len(pieces)).tolist()
        flat = [i for o in order for i in pieces[o]]
        full += [flat[i : i + batch_size] for i in range(0, len(flat) - batch_size + 1, batch_size)]
    if packing == "random":
        return [full[i] for i in rng.permutation(len(full))]
    centroids = np.stack([pair_vec[b].mean(0) for b in full])  # (batches, 2d)
    return [full[i] for i in _greedy_tour(centroids, start=int(rng.integers(len(full))))]


def false_negative_mask(
    q: np.ndarray, d: np.ndarray, batch: Sequence[int], query_ids: Sequence[str], doc_ids: Sequence[str], margin: float
) -> np.ndarray:
    """(B, B) bool: documents left out of each query's partition function (Eq. 4): those the surrogate scores at
    least `margin` above the query's own positive, and other positives of the same query or the same document."""
    idx = np.asarray(batch)
    sims = q[idx] @ d[idx].T  # (B, B)
    pos = np.diag(sims)[:, None]  # (B, 1)
    mask = sims >= pos + margin
    qid = np.asarray([query_ids[i] for i in batch])
    did = np.asarray([doc_ids[i] for i in batch])
    mask |= (qid[:, None] == qid[None, :]) | (did[:, None] == did[None, :])
    np.fill_diagonal(mask, False)
    return mask


def mean_negative_similarity(q: np.ndarray, d: np.ndarray, batches: Sequence[Sequence[int]]) -> float:
    """How hard a batching's in-batch negatives are: mean surrogate score of q_i against d_j, j != i."""
    total, count = 0.0, 0
    for b in batches:
        idx = np.asarray(b)
        sims = q[idx] @ d[idx].T  # (B, B)
        total += float(sims.sum() - np.trace(sims))
        count += len(idx) * (len(idx) - 1)
    return total / max(count, 1)
