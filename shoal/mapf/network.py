"""The shared recurrent, communicating Q-network of MAPF agents (DHC's design, Ma et al.
2021), and the packed joint observation it reads.

Every agent runs the same parameters on its own ``6 x fov x fov`` view: a convolutional
encoder with residual blocks, a GRU cell carrying the agent's memory, then ``rounds``
rounds of masked multi-head attention in which each agent reads the memories of the agents
it may talk to (the env's communication mask: at most ``k_comm`` nearest in view, self
included) and folds what it read in with a second GRU cell, and a dueling Q head. The
recurrent state carried from step to step is the memory *before* communication (what an
agent keeps is its own; messages are recomputed every step).

One step of the world is one **joint observation**: every agent's view, the communication
mask and which of the ``max_agents`` rows are real agents (runs whose curriculum changes the
agent count pad to a fixed maximum, so replay items keep one shape). It travels and is
stored as one flat uint8 vector of bits (:class:`JointLayout`): every entry is binary, so
replay holds 1/32 of float32's bytes, and a flat vector fits the sequence writer and the
replay buffer as any other observation does.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from shoal.agent.networks import Params
from shoal.envs.mapf import ACTIONS, OBS_CHANNELS

__all__ = ["CommQNetwork", "JointLayout", "JointObs"]


@dataclass(frozen=True)
class JointObs:
    """One world step as tensors: ``view`` float ``(..., N, C, fov, fov)``, ``comm`` bool
    ``(..., N, N)`` (who may read whom; True diagonal on real agents), ``valid`` bool
    ``(..., N)`` (real agents, not padding)."""

    view: torch.Tensor
    comm: torch.Tensor
    valid: torch.Tensor


@dataclass(frozen=True)
class JointLayout:
    """The packed form of a joint observation: the bits ``valid (N) | comm (N * N) | views
    (N * C * fov * fov)`` for ``N = max_agents``, eight to a byte (every entry is binary,
    so a step of 8 agents with 9 x 9 views is 495 bytes instead of 16 KB of float32).

    Example:
        >>> layout = JointLayout(max_agents=3, fov=3)
        >>> view = np.ones((2, 6, 3, 3), np.float32)
        >>> packed = layout.pack(view, np.eye(2, dtype=bool))
        >>> packed.shape, packed.dtype, layout.bits
        ((22,), dtype('uint8'), 174)
        >>> joint = layout.unpack(torch.as_tensor(packed)[None])
        >>> joint.valid.tolist(), joint.view.shape, float(joint.view.sum())
        ([[True, True, False]], torch.Size([1, 3, 6, 3, 3]), 108.0)
    """

    max_agents: int
    fov: int = 9
    channels: int = len(OBS_CHANNELS)

    @property
    def bits(self) -> int:
        """Binary entries of one joint observation."""
        n = self.max_agents
        return n + n * n + n * self.channels * self.fov * self.fov

    @property
    def size(self) -> int:
        """Bytes of one packed joint observation."""
        return -(-self.bits // 8)

    def pack(self, view: np.ndarray, comm: np.ndarray) -> np.ndarray:
        """uint8 ``(size,)`` from the K real agents' ``view`` ``(K, C, fov, fov)`` (binary)
        and ``comm`` ``(K, K)``; rows K..N-1 are padding."""
        k, n = len(view), self.max_agents
        if k > n:
            raise ValueError(f"{k} agents do not fit a layout of max_agents={n}")
        out = np.zeros(self.bits, np.bool_)
        out[:k] = True
        out[n : n + n * n].reshape(n, n)[:k, :k] = comm
        out[n + n * n :].reshape(n, -1)[:k] = view.reshape(k, -1) > 0.5
        return np.packbits(out, bitorder="little")

    def unpack(self, packed: torch.Tensor) -> JointObs:
        """The tensors of packed observations ``(..., size)`` uint8 (any leading dims)."""
        n, lead = self.max_agents, packed.shape[:-1]
        shifts = torch.arange(8, dtype=torch.uint8, device=packed.device)
        bits = ((packed.unsqueeze(-1) >> shifts) & 1).reshape(*lead, -1)[..., : self.bits]
        valid = bits[..., :n].bool()
        comm = bits[..., n : n + n * n].reshape(*lead, n, n).bool()
        view = bits[..., n + n * n :].reshape(*lead, n, self.channels, self.fov, self.fov)
        return JointObs(view.float(), comm, valid)


class _ResBlock(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.leaky_relu(x + self.conv2(F.leaky_relu(self.conv1(x), 0.2)), 0.2)


class _Comm(nn.Module):
    """Rounds of masked multi-head attention over agents' memories, each folded in by a GRU
    cell; agents with nobody to talk to keep their memory."""

    def __init__(self, hidden: int, heads: int, rounds: int) -> None:
        super().__init__()
        self.heads, self.rounds = heads, rounds
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.out = nn.Linear(hidden, hidden)
        self.update = nn.GRUCell(hidden, hidden)

    def forward(self, h: torch.Tensor, comm: torch.Tensor) -> torch.Tensor:
        *lead, n, d = h.shape
        eye = torch.eye(n, dtype=torch.bool, device=h.device)
        mask = comm | eye  # padding rows attend to themselves: no empty softmax
        talks = (comm & ~eye).any(-1, keepdim=True)
        if not talks.any():  # nobody in touch (one agent, or all apart): nothing to read
            return h
        for _ in range(self.rounds):
            q, k, v = self.qkv(h).view(*lead, n, 3, self.heads, d // self.heads).unbind(-3)
            q, k, v = (x.transpose(-2, -3) for x in (q, k, v))  # (..., heads, N, d_head)
            att = F.scaled_dot_product_attention(q, k, v, attn_mask=mask.unsqueeze(-3))
            read = self.out(att.transpose(-2, -3).reshape(*lead, n, d))
            new = self.update(read.reshape(-1, d), h.reshape(-1, d)).view_as(h)
            h = torch.where(talks, new, h)
        return h


class CommQNetwork(nn.Module):
    """Q-values of every agent of a joint observation, and the next recurrent memories.

    ``apply_params(params, obs, state) -> (q, next_state)``: ``obs`` packed joint
    observations ``(B, layout.size)`` (uint8 or float), ``state`` ``(B, N, hidden)``, ``q``
    ``(B, N, 5)``. A pure function of explicit parameters (``torch.func.functional_call``),
    as every shoal network is, so actors act on published weights and a learner unrolls
    stored sequences. :meth:`encode` and :meth:`core` split it, so a learner encodes a whole
    sequence's views in one batched convolution and only steps the recurrent part.

    Args:
        layout: the joint observation's layout (max agents, field of view).
        channels: convolution channels.
        blocks: residual blocks after the first convolution.
        hidden: memory (GRU) and message size.
        heads: attention heads (must divide ``hidden``).
        rounds: communication rounds per step.
        comm: False masks all communication off (each agent reads only itself): the
            baseline that shows what communication is worth.

    Example:
        >>> net = CommQNetwork(JointLayout(max_agents=4), channels=8, blocks=1, hidden=16,
        ...                    heads=2)
        >>> obs = torch.zeros(3, net.layout.size, dtype=torch.uint8)
        >>> q, h = net(obs, net.initial_state(3))
        >>> q.shape, h.shape
        (torch.Size([3, 4, 5]), torch.Size([3, 4, 16]))
    """

    recurrent = True
    """Actors pass a state through :meth:`apply_params`."""
    obs_dtype = torch.uint8
    """Observations are packed bits (:class:`JointLayout`), never cast to float."""

    def __init__(
        self,
        layout: JointLayout,
        *,
        channels: int = 32,
        blocks: int = 1,
        hidden: int = 64,
        heads: int = 4,
        rounds: int = 2,
        comm: bool = True,
    ) -> None:
        super().__init__()
        if hidden % heads:
            raise ValueError(f"hidden={hidden} must be a multiple of heads={heads}")
        self.layout, self.hidden, self.comm = layout, hidden, comm
        self.n_actions = len(ACTIONS)
        side = layout.fov - 2  # the first convolution has no padding
        self.encoder = nn.Sequential(
            nn.Conv2d(layout.channels, channels, 3),
            nn.LeakyReLU(0.2),
            *(_ResBlock(channels) for _ in range(blocks)),
            nn.Conv2d(channels, 8, 1),
            nn.LeakyReLU(0.2),
            nn.Flatten(),
        )
        self.memory = nn.GRUCell(8 * side * side, hidden)
        self.talk = _Comm(hidden, heads, rounds)
        self.value = nn.Linear(hidden, 1)
        self.advantage = nn.Linear(hidden, self.n_actions)

    def for_agents(self, max_agents: int) -> CommQNetwork:
        """The same network (shared parameters) reading joint observations of up to
        ``max_agents`` agents: the parameters are per agent, so a policy trained with 8
        plays 16 (generalisation) with another layout."""
        if max_agents == self.layout.max_agents:
            return self
        other = copy.copy(self)  # a shallow copy: the very same submodules and parameters
        other.layout = JointLayout(max_agents, self.layout.fov, self.layout.channels)
        return other

    def initial_state(self, batch: int) -> torch.Tensor:
        """Zero memories ``(batch, N, hidden)`` for episodes starting."""
        return torch.zeros(
            batch, self.layout.max_agents, self.hidden, device=self.value.weight.device
        )

    def _encode(self, joint: JointObs) -> torch.Tensor:
        """Per-agent features ``(..., n, F)`` of unpacked observations."""
        lead = joint.view.shape[:-3]
        views = joint.view.reshape(-1, *joint.view.shape[-3:])
        # Only real agents' views are encoded: early in a curriculum most rows are padding.
        rows = joint.valid.reshape(-1).nonzero().squeeze(-1)
        z = self.encoder(views[rows].contiguous(memory_format=torch.channels_last))
        out = z.new_zeros(len(views), z.shape[-1]).index_copy(0, rows, z)
        return out.view(*lead, -1)

    def _step(
        self, z: torch.Tensor, comm: torch.Tensor, state: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One step from features ``(B, n, F)``: Q ``(B, n, 5)`` and the next memory."""
        b, n, d = state.shape
        h = self.memory(z.reshape(b * n, -1), state.reshape(b * n, d)).view(b, n, d)
        m = self.talk(h, comm) if self.comm else h
        adv = self.advantage(m)
        return self.value(m) + adv - adv.mean(-1, keepdim=True), h

    def forward(
        self,
        obs: torch.Tensor,
        state: torch.Tensor,
        mask: torch.Tensor | None = None,
        burn_in: int = 0,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One step, or an unroll over a sequence, under the module's own parameters.

        ``obs`` ``(B, size)``: Q ``(B, N, 5)`` and the next state. ``obs`` ``(B, T, size)``
        with ``mask`` bool ``(B, T)``: Q ``(B, T, N, 5)`` at every slot and the state after
        the last; on slots where ``mask`` is False the state passes unchanged, so leading
        padding leaves the stored state as it was. The first ``burn_in`` slots only warm
        the state up: they run without gradients (R2D2), and so does their encoding.
        Padding rows never affect real agents (attention and the loss ignore them); rows
        beyond the fullest world of the batch are not computed at all (zero Q-values,
        state kept).
        """
        joint = self.layout.unpack(obs)
        # Real agents fill the first rows: compute only as many rows as the fullest world
        # (a batch of 2-agent worlds in an 8-agent layout costs a quarter).
        n = int(joint.valid.sum(-1).max()) if joint.valid.numel() else 0
        n = max(n, 1)
        part = JointObs(joint.view[..., :n, :, :, :], joint.comm[..., :n, :n], joint.valid[..., :n])
        if obs.dim() == 2:
            q, h = self._step(self._encode(part), part.comm, state[:, :n])
        else:
            q, h = self._unroll(part, state[:, :n], mask, burn_in)
        full = state.clone()
        full[:, :n] = h
        return F.pad(q, (0, 0, 0, self.layout.max_agents - n)), full

    def _unroll(
        self, joint: JointObs, state: torch.Tensor, mask: torch.Tensor | None, burn_in: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if mask is None:
            mask = torch.ones(joint.valid.shape[:2], dtype=torch.bool, device=state.device)
        qs = []
        parts = [(slice(0, burn_in), False), (slice(burn_in, None), True)]
        if not torch.is_grad_enabled():  # no gradients anywhere: one encoding of all slots
            parts = [(slice(0, None), False)]
        for part, grad in parts:
            if part.start == part.stop:  # no burn-in
                continue
            with torch.set_grad_enabled(grad and torch.is_grad_enabled()):
                view = JointObs(joint.view[:, part], joint.comm[:, part], joint.valid[:, part])
                z = self._encode(view)
                if not grad:
                    state = state.detach()
                for t in range(z.shape[1]):
                    q, nxt = self._step(z[:, t], view.comm[:, t], state)
                    state = torch.where(mask[:, part][:, t, None, None], nxt, state)
                    qs.append(q)
        return torch.stack(qs, dim=1), state

    def apply_params(
        self,
        params: Params,
        obs: torch.Tensor,
        state: torch.Tensor,
        mask: torch.Tensor | None = None,
        burn_in: int = 0,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`forward` under explicit ``params`` (``state_dict`` names): a pure
        function, so actors act on published weights and learners on their own."""
        return functional_call(self, dict(params), (obs, state), {"mask": mask, "burn_in": burn_in})

    def unroll(
        self,
        params: Params,
        obs: torch.Tensor,
        state: torch.Tensor,
        mask: torch.Tensor,
        burn_in: int,
    ) -> torch.Tensor:
        """Q ``(B, T, N, 5)`` over packed sequences ``(B, T, size)`` (see :meth:`forward`):
        the views of all slots are encoded in one batched convolution."""
        return self.apply_params(params, obs, state, mask, burn_in)[0]

    def agent_mask(self, obs: torch.Tensor) -> torch.Tensor:
        """bool ``(..., N)``: which rows of packed observations ``(..., size)`` are real
        agents (the loss ignores padding)."""
        return self.layout.unpack(obs).valid
