"""Q-networks: an MLP torso (optionally after a convolutional board encoder) with a plain or
a dueling head.

Every network is a pure function of explicit parameters, :meth:`QNetwork.apply_params`
``(params, obs) -> q``, so that one loss serves one learner (its own parameters), K
stacked learners (``torch.func.vmap`` over stacked parameters) and actors that hold a
published copy of the weights without loading it into a module. ``forward`` is that same
function applied to the module's own parameters. Any other ``nn.Module`` (a user's own
network) is applied the same way through :func:`apply_network`, with
``torch.func.functional_call``: it needs no ``apply_params`` of its own.
"""

from __future__ import annotations

import copy
import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from shoal.config import ENCODERS

if TYPE_CHECKING:
    from shoal.config import DQNConfig

__all__ = [
    "ENCODERS",
    "BoardEncoder",
    "ImageEncoder",
    "Params",
    "QNetwork",
    "RecurrentQNetwork",
    "apply_network",
    "dense",
    "image_encoder",
    "linear",
    "load_weights",
    "make_q_network",
    "network_args",
    "recurrent_q",
]

Params = Mapping[str, torch.Tensor]
"""Parameters by their ``state_dict`` names (``torso.0.weight``, ...)."""


def capturing() -> bool:
    """Whether a CUDA graph is being recorded now (no host sync may happen: a network takes
    its data-independent path)."""
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


def apply_network(network: nn.Module, params: Params, obs: torch.Tensor, *rest: Any) -> Any:
    """``network``'s output for ``obs`` under explicit ``params``: shoal's networks through
    their own pure ``apply_params``, any other module through
    ``torch.func.functional_call`` (so it runs under ``vmap`` and ``autograd.grad`` alike,
    and a user's network needs nothing of shoal). Such a network reads observations as
    floats (replay keeps image bytes as bytes). Buffers not in ``params`` are the
    module's own."""
    own = getattr(network, "apply_params", None)
    if own is not None:
        return own(params, obs, *rest)
    if not obs.is_floating_point():
        obs = obs.float()
    return functional_call(_thread_copy(network), params, (obs, *rest), strict=False)


def recurrent_q(
    network: nn.Module, params: Params, obs: Any, states: torch.Tensor, device: Any
) -> tuple[torch.Tensor, torch.Tensor]:
    """One step of a recurrent network: Q-values for a batch of observations and each
    row's next memory. The observations cross to ``device`` as the network reads them (its
    ``obs_dtype``: MAPF's packed bits stay bytes), the memories with them. Every recurrent
    actor, policy and player steps its network through here."""
    dtype = getattr(network, "obs_dtype", torch.float32)
    x = torch.as_tensor(obs, dtype=dtype, device=device)
    return apply_network(network, params, x, states.to(device))


def load_weights(network: nn.Module, weights: Params) -> None:
    """Load saved weights into ``network``: every parameter, and the buffers saved with
    them. An evaluation's weights (``best.pt``) are parameters only, so a user's module's
    buffers (say its action bounds) keep the factory's values. Weights of another shape
    (a changed ``dqn.hidden``) or names are a one-line ValueError naming the first
    parameter and both shapes; any other mismatch is torch's error."""
    from shoal.run.checkpoint import weights_misfit

    buffers = {name for name, _ in network.named_buffers()}
    misfit = weights_misfit(weights, network.state_dict(), optional=buffers)
    if misfit is not None:
        raise ValueError(misfit)
    missing, unexpected = network.load_state_dict(weights, strict=False)
    if unexpected or set(missing) - buffers:
        network.load_state_dict(weights)  # torch's own message names the keys


_threads = threading.local()


def _thread_copy(network: nn.Module) -> nn.Module:
    """This thread's own copy of ``network``: ``functional_call`` swaps the given tensors
    into the module while it runs, so two threads calling it on one module (learner
    threads, or a learner beside an acting thread) would compute with each other's
    weights."""
    if torch.compiler.is_compiling():
        # A compiled loss (run.compile = "compile") traces the module itself: the table of
        # copies is Python state torch.compile would guard on, and a guard on its keys
        # broke when another thread's copy came or went. One thread runs a compiled
        # learner (the threads runner refuses it), and actors use their own copies.
        return network
    copies = getattr(_threads, "copies", None)
    if copies is None:
        copies = _threads.copies = weakref.WeakKeyDictionary()
    own = copies.get(network)
    if own is None:
        # Copied outside inference mode whoever asks first (an actor acts in it): its
        # buffers are then tensors a learner's backward may save.
        with torch.inference_mode(False):
            own = copies[network] = copy.deepcopy(network)
    return own


class _StackedLinear(torch.autograd.Function):
    """K linear layers as one batched matmul, with a backward that writes each weight's
    gradient in the weight's own ``(K, out, in)`` layout. Autograd's own backward of
    ``baddbmm(b, x, w.transpose)`` yields ``(K, in, out)`` gradients seen transposed, and
    every later use (clipping norms, Adam) then pays a strided copy: measured at K = 128,
    those copies were a fifth of a training step."""

    # The old-style forward(ctx, ...): measured, its call costs a fifth of the
    # setup_context style's (which exists for torch.func; this path never runs under it).
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> Any:
        ctx.save_for_backward(x, weight)
        return torch.baddbmm(bias.unsqueeze(-2), x, weight.transpose(-1, -2))

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, weight = ctx.saved_tensors
        need_x, need_w, need_b = ctx.needs_input_grad
        grad_x = torch.bmm(grad, weight) if need_x else None
        grad_w = torch.bmm(grad.transpose(-1, -2), x) if need_w else None
        grad_b = grad.sum(-2) if need_b else None
        return grad_x, grad_w, grad_b


def dense(params: Params, prefix: str, x: torch.Tensor) -> torch.Tensor:
    """The linear layer ``prefix`` of ``params`` on ``x``: a noisy layer
    (:mod:`shoal.agent.noisy`) with the noise ``params`` carries for it, else with its mean
    weights (as every layer that is not noisy)."""
    w, b = params[prefix + "weight"], params[prefix + "bias"]
    e_in = params.get(prefix + "noise_in")
    if e_in is not None:
        e_out = params[prefix + "noise_out"]
        w = w + params[prefix + "weight_sigma"] * (e_out.unsqueeze(-1) * e_in.unsqueeze(-2))
        b = b + params[prefix + "bias_sigma"] * e_out
    return linear(x, w, b)


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """``F.linear`` for one network, or for K stacked ones: weights ``(K, out, in)``,
    inputs ``(K, B, in)``, one batched matmul (``baddbmm``). Measured at K = 8-128 on CPU,
    that beats ``torch.func.vmap`` over ``F.linear`` by 1.2-1.5x for loss plus gradients
    (vmap adds a separate broadcast add and a per-call overhead), with identical results."""
    if weight.dim() == 2:
        return F.linear(x, weight, bias)
    if torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad or bias.requires_grad):
        return _StackedLinear.apply(x, weight, bias)
    return torch.baddbmm(bias.unsqueeze(-2), x, weight.transpose(-1, -2))  # acting, targets


class BoardEncoder(nn.Module):
    """Convolutions over the first ``H * W * C`` observation entries (a board stored
    height x width x channels), concatenated with the remaining entries (e.g. an action
    mask). Board games have local patterns (lines, threats) that a convolution sees in any
    position, where an MLP must learn each position separately.

    Example:
        >>> enc = BoardEncoder((6, 7, 2), channels=[16], extra=7)
        >>> enc(torch.zeros(3, 6 * 7 * 2 + 7)).shape == (3, enc.width)
        True
    """

    def __init__(self, shape: Sequence[int], *, channels: Sequence[int], extra: int) -> None:
        super().__init__()
        self.shape = tuple(int(x) for x in shape)
        h, w, c = self.shape
        layers: list[nn.Module] = []
        for out in channels:
            layers += [nn.Conv2d(c, out, kernel_size=3, padding=1), nn.ReLU()]
            c = out
        self.conv = nn.Sequential(*layers)
        self.board = h * w * self.shape[2]
        self.width = h * w * c + extra

    def apply_params(self, params: Params, prefix: str, obs: torch.Tensor) -> torch.Tensor:
        """Conv features of the board, flattened, followed by the other entries."""
        h, w, c = self.shape
        x = obs[..., : self.board].reshape(-1, h, w, c).permute(0, 3, 1, 2)
        for i in range(0, len(self.conv), 2):
            name = f"{prefix}conv.{i}."
            x = F.relu(F.conv2d(x, params[name + "weight"], params[name + "bias"], padding=1))
        return torch.cat([x.flatten(1), obs[..., self.board :]], dim=-1)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Conv features of the board, flattened, followed by the other entries."""
        return self.apply_params(dict(self.named_parameters()), "", obs)


_LAYERS = {
    # (out channels, kernel, stride) per convolution
    "minatar": ((16, 3, 1),),  # Young and Tian 2019: one 3 x 3 conv of 16, no padding
    "nature": ((32, 8, 4), (64, 4, 2), (64, 3, 1)),  # Mnih et al. 2015
    # data-efficient Rainbow's (van Hasselt et al. 2019): two wide strides, ~1/8 of the
    # Nature network's multiply-adds on 84 x 84 frames, for an update every env step
    "der": ((32, 5, 5), (64, 5, 5)),
}


def min_side(kind: str) -> int:
    """The smallest image side encoder ``kind``'s convolutions leave a feature on."""
    side = 1
    for _, kernel, stride in reversed(_LAYERS[kind]):
        side = (side - 1) * stride + kernel
    return side


NATURE_MIN = min_side("nature")
"""The smallest image side the Nature encoder's three convolutions leave a feature on (36)."""


class ImageEncoder(nn.Module):
    """Convolutions over a ``(C, H, W)`` image at the start of a flat observation, its
    pixels scaled by ``1 / high`` on the device (bytes cross from the env and the replay as
    they are), the features flattened and followed by the observation's ``extra`` other
    entries as they are (a Dict observation's direction beside its image,
    :mod:`shoal.envs.dict_obs`): MinAtar's encoder, the Nature DQN's or data-efficient
    Rainbow's.

    Example:
        >>> enc = ImageEncoder((4, 10, 10), kind="minatar")
        >>> enc(torch.zeros(3, 400, dtype=torch.uint8)).shape == (3, enc.width)
        True
        >>> enc = ImageEncoder((4, 10, 10), kind="minatar", extra=4)
        >>> enc(torch.zeros(3, 404, dtype=torch.uint8)).shape == (3, 16 * 8 * 8 + 4)
        True
    """

    def __init__(
        self, shape: Sequence[int], *, kind: str, high: float = 1.0, extra: int = 0
    ) -> None:
        super().__init__()
        c, h, w = self.shape = tuple(int(x) for x in shape)
        self.pixels = c * h * w
        """Entries of the observation that are the image."""
        self.extra = extra
        """Entries after the image, passed on beside the conv features (not scaled)."""
        self.scale = 1.0 / high
        layers: list[nn.Module] = []
        self.strides = []
        for out, kernel, stride in _LAYERS[kind]:
            layers += [nn.Conv2d(c, out, kernel_size=kernel, stride=stride), nn.ReLU()]
            self.strides.append(stride)
            c, h, w = out, (h - kernel) // stride + 1, (w - kernel) // stride + 1
        self.conv = nn.Sequential(*layers)
        self.conv_width = c * h * w
        """Width of the conv features."""

    @property
    def width(self) -> int:
        """Width of the output: the conv features and the other entries."""
        return self.conv_width + self.extra

    def apply_params(self, params: Params, prefix: str, obs: torch.Tensor) -> torch.Tensor:
        """Conv features of the image, flattened, then the other entries as floats. The
        pixel scale multiplies the first layer's weights, not the pixels: a pass over the
        whole batch of images less (a sixth of an Atari update on CPU), the same
        function."""
        x = obs[..., : self.pixels].reshape(-1, *self.shape).float()
        for k, stride in enumerate(self.strides):
            name = f"{prefix}conv.{2 * k}."
            weight = params[name + "weight"]
            if k == 0 and self.scale != 1.0:
                weight = weight * self.scale
            x = F.relu(F.conv2d(x, weight, params[name + "bias"], stride=stride))
        if not self.extra:
            return x.flatten(1)
        rest = obs[..., self.pixels :].reshape(-1, self.extra).float()
        return torch.cat([x.flatten(1), rest], dim=-1)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Conv features of the image, flattened, then the other entries."""
        return self.apply_params(dict(self.named_parameters()), "", obs)


class QNetwork(nn.Module):
    """Maps a batch of flat observations to one Q-value per discrete action (through an
    image encoder when ``image`` is given: the observations start with the image, and
    whatever follows it goes beside the conv features).

    The dueling head (Wang et al. 2016) splits the last layer into a state value V(s) and
    advantages A(s, a), combined as ``V + A - mean(A)`` so that the two are identifiable.

    Example:
        >>> net = QNetwork(4, 2, hidden=[32, 32], dueling=True)
        >>> net(torch.zeros(5, 4)).shape
        torch.Size([5, 2])
        >>> params = {k: v + 1 for k, v in net.state_dict().items()}
        >>> net.apply_params(params, torch.zeros(5, 4)).shape
        torch.Size([5, 2])
    """

    def __init__(
        self,
        obs_dim: int,
        n_actions: int,
        *,
        hidden: Sequence[int],
        dueling: bool,
        board: Sequence[int] = (),
        conv: Sequence[int] = (),
        image: ImageEncoder | None = None,
        noisy: bool = False,
        sigma0: float = 0.5,
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        width = obs_dim
        if board:
            h, w, c = board
            enc = BoardEncoder(board, channels=conv, extra=obs_dim - h * w * c)
            layers.append(enc)
            width = enc.width
        if image is not None:
            # the entries after the image (a Dict observation's others) go beside its features
            image.extra = obs_dim - image.pixels
            if image.extra < 0:
                raise ValueError(f"observations of {obs_dim} values hold no image {image.shape}")
            layers.append(image)
            width = image.width
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        self.torso = nn.Sequential(*layers)
        self.width = width
        """Size of the torso's output (the features heads read)."""
        self.n_actions = n_actions
        self.stackable = not board and image is None
        """:meth:`apply_params` also takes K stacked parameter sets and ``(K, B, obs)``
        inputs (an MLP: batched matmuls; the convolutions need ``vmap``)."""
        self.dueling = dueling
        if dueling:
            self.value = nn.Linear(width, 1)
            self.advantage = nn.Linear(width, n_actions)
        else:
            self.head = nn.Linear(width, n_actions)
        self.noisy = noisy
        """Its last hidden layer and its head are noisy layers (:mod:`shoal.agent.noisy`)."""
        if noisy:
            self.make_noisy(sigma0)

    def make_noisy(self, sigma0: float) -> None:
        """Give the head and the last hidden layer noise parameters (Rainbow's noisy
        streams: the layers nearest the Q-values)."""
        from shoal.agent.noisy import add_noise_parameters

        heads = [self.value, self.advantage] if self.dueling else [self.head]
        hidden = [m for m in self.torso if isinstance(m, nn.Linear)][-1:]
        for layer in [*hidden, *heads]:
            add_noise_parameters(layer, sigma0)

    def features(self, params: Params, obs: torch.Tensor) -> torch.Tensor:
        """The torso's output for ``obs`` under ``params`` (bytes only reach an image
        encoder as bytes; other layers read them as floats)."""
        x = obs
        reads_bytes = len(self.torso) > 0 and isinstance(self.torso[0], ImageEncoder)
        if not x.is_floating_point() and not reads_bytes:
            x = x.float()
        for i, layer in enumerate(self.torso):
            if isinstance(layer, (BoardEncoder, ImageEncoder)):
                x = layer.apply_params(params, f"torso.{i}.", x)
            elif isinstance(layer, nn.Linear):
                x = dense(params, f"torso.{i}.", x).relu_()
        return x

    def q_values(self, params: Params, z: torch.Tensor) -> torch.Tensor:
        """Q-values from torso features ``z`` (shared with heads added by subclasses)."""
        if not self.dueling:
            return dense(params, "head.", z)
        adv = dense(params, "advantage.", z)
        value = dense(params, "value.", z)
        return value + adv - adv.mean(dim=-1, keepdim=True)

    def apply_params(self, params: Params, obs: torch.Tensor) -> torch.Tensor:
        """Q-values of shape (batch, n_actions) under explicit ``params``: a pure function,
        so it runs under ``torch.func`` transforms."""
        return self.q_values(params, self.features(params, obs))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Q-values of shape (batch, n_actions) under the module's own parameters."""
        return self.apply_params(dict(self.named_parameters()), obs)


def make_q_network(
    cfg: DQNConfig,
    obs_dim: int,
    n_actions: int,
    *,
    image: Sequence[int] | None = None,
    image_high: float = 1.0,
    noisy: bool = False,
    sigma0: float = 0.5,
) -> QNetwork:
    """The Q-network a DQN config describes (the learner's and every actor's copy), for
    observations that are ``image`` (``(C, H, W)``, pixels up to ``image_high``) or not."""
    args = network_args(cfg, image=image, image_high=image_high, noisy=noisy, sigma0=sigma0)
    return QNetwork(obs_dim, n_actions, **args)


def network_args(
    cfg: DQNConfig,
    *,
    image: Sequence[int] | None = None,
    image_high: float = 1.0,
    noisy: bool = False,
    sigma0: float = 0.5,
) -> dict[str, Any]:
    """The torso and head a DQN config describes, as :class:`QNetwork`'s keyword arguments
    (and those of its subclasses: quantile, categorical): the image encoder ``dqn.encoder``
    picks for ``image`` observations, the board, the hidden layers, dueling and noise."""
    kind = image_encoder(cfg.encoder, image)
    encoder = None if kind is None else ImageEncoder(image, kind=kind, high=image_high)  # type: ignore[arg-type]
    return {
        "hidden": cfg.hidden,
        "dueling": cfg.dueling,
        "board": cfg.board,
        "conv": cfg.conv,
        "image": encoder,
        "noisy": noisy,
        "sigma0": sigma0,
    }


def image_encoder(encoder: str, image: Sequence[int] | None) -> str | None:
    """The image encoder ``dqn.encoder`` asks for given the observations' ``image`` shape
    (None: an MLP); a :class:`~shoal.errors.ConfigError` for an image encoder on flat
    observations or an image too small for it."""
    from shoal.errors import ConfigError

    if encoder == "mlp" or (encoder == "auto" and image is None):
        return None
    if image is None:
        raise ConfigError(
            f"config key 'dqn.encoder': {encoder!r} reads images, and this env's"
            " observations are flat vectors (use 'mlp' or 'auto')"
        )
    side = min(image[1:])
    if encoder == "auto":
        return "nature" if side >= NATURE_MIN else "minatar"
    least = min_side(encoder)
    if side < least:
        raise ConfigError(
            f"config key 'dqn.encoder': {encoder!r} needs images at least {least} x {least};"
            f" this env's are {image[1]} x {image[2]} (use 'minatar' or 'auto')"
        )
    return encoder


class RecurrentQNetwork(nn.Module):
    """An MLP encoder, a GRU or LSTM cell carrying memory across steps, and a linear Q head.

    ``apply_params(params, obs, state) -> (q, next_state)``: a pure function, as for
    :class:`QNetwork`, with the recurrent state passed in and returned (never kept in the
    module), so actors carry it per episode and a learner can unroll stored sequences. The
    cells are :class:`torch.nn.GRUCell`'s and :class:`torch.nn.LSTMCell`'s, written over
    explicit parameters; an LSTM's state is ``(h, c)`` side by side, ``(batch, 2 *
    state_dim)`` (:attr:`state_size`), so every state is one array.

    Example:
        >>> net = RecurrentQNetwork(4, 2, hidden=[16], state_dim=8)
        >>> h = net.initial_state(3)
        >>> q, h = net(torch.zeros(3, 4), h)
        >>> q.shape, h.shape
        (torch.Size([3, 2]), torch.Size([3, 8]))
        >>> RecurrentQNetwork(4, 2, hidden=[16], state_dim=8, cell="lstm").state_size
        16
    """

    recurrent = True
    """Actors pass a state through :meth:`apply_params`."""

    def __init__(
        self,
        obs_dim: int,
        n_actions: int,
        *,
        hidden: Sequence[int],
        state_dim: int,
        cell: str = "gru",
    ) -> None:
        super().__init__()
        if cell not in ("gru", "lstm"):
            raise ValueError(f"cell must be 'gru' or 'lstm', got {cell!r}")
        layers: list[nn.Module] = []
        width = obs_dim
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        self.torso = nn.Sequential(*layers)
        self.cell = cell
        self.gru = nn.GRUCell(width, state_dim) if cell == "gru" else nn.LSTMCell(width, state_dim)
        self.head = nn.Linear(state_dim, n_actions)
        self.n_actions = n_actions
        self.state_dim = state_dim
        self.state_size = state_dim * (2 if cell == "lstm" else 1)
        """Width of the state an actor carries and replay stores."""

    def initial_state(self, batch: int) -> torch.Tensor:
        """Zero memory for ``batch`` episodes starting."""
        return torch.zeros(batch, self.state_size, device=self.head.weight.device)

    def apply_params(
        self, params: Params, obs: torch.Tensor, state: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Q-values ``(batch, n_actions)`` and the next state ``(batch, state_size)``."""
        nxt = self._recur(params, self._input_gates(params, obs), state)
        return self._q(params, nxt), nxt

    def unroll(
        self,
        params: Params,
        obs: torch.Tensor,
        state: torch.Tensor,
        mask: torch.Tensor,
        burn_in: int,
    ) -> torch.Tensor:
        """Q ``(B, T, n_actions)`` over sequences ``obs`` ``(B, T, obs_dim)`` from
        ``state``, as :func:`~shoal.agent.sequence_loss.unroll` steps it, at every slot a
        loss reads: the burn-in is stepped without gradients, keeping the state over its
        leading padding; the rest runs in torch's fused LSTM or GRU (the whole update 2.2x
        faster than stepping it), whose state steps on over trailing padding too, where only
        the first slot's Q (the bootstrap after the last valid step) is read."""
        with torch.no_grad():
            warm, state = self._burn_in(params, obs[:, :burn_in], state, mask[:, :burn_in])
        out = self._fused(params, self._torso(params, obs[:, burn_in:]), state)[0]
        return self._q(params, torch.cat([warm, out], 1))

    def _burn_in(
        self, params: Params, obs: torch.Tensor, state: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Each slot's output and the state after the burn-in slots: fused for the items
        whose burn-in is all valid, stepped (keeping the stored state over the padding) for
        those that begin near their episode's start."""
        if obs.shape[1] == 0:
            return obs.new_zeros(len(obs), 0, self.state_dim), state
        x = self._torso(params, obs)
        out, last = self._fused(params, x, state)
        if capturing():  # no host sync: step every row, keep it where it has padding
            padded = ~mask.all(1)
            stepped, kept = self._stepped(params, x, state, mask)
            out = torch.where(padded[:, None, None], stepped, out)
            return out, torch.where(padded[:, None], kept, last)
        rows = (~mask.all(1)).nonzero().squeeze(1)
        if len(rows):
            out[rows], last[rows] = self._stepped(params, x[rows], state[rows], mask[rows])
        return out, last

    def _stepped(
        self, params: Params, x: torch.Tensor, state: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The burn-in stepped slot by slot, the state kept over invalid slots: each slot's
        output and the state after them."""
        gates = F.linear(x, params["gru.weight_ih"], params["gru.bias_ih"])
        kept, outs = state, []
        for t in range(x.shape[1]):
            nxt = self._recur(params, gates[:, t], kept)
            kept = torch.where(mask[:, t, None], nxt, kept)
            outs.append(nxt[:, : self.state_dim])
        return torch.stack(outs, 1), kept

    def _fused(
        self, params: Params, x: torch.Tensor, state: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """torch's LSTM or GRU over ``x`` ``(B, T, width)`` from ``state``: the output
        ``(B, T, state_dim)`` and the final state. ``train`` follows grad mode: cuDNN keeps
        what its backward needs only in training mode (CPU ignores the flag), and dropout
        is 0 either way."""
        train = torch.is_grad_enabled()
        weights = [params[f"gru.{k}"] for k in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
        if self.cell == "lstm":
            h, c = (part.unsqueeze(0).contiguous() for part in state.chunk(2, dim=-1))
            out, h, c = torch.lstm(x, (h, c), weights, True, 1, 0.0, train, False, True)
            return out, torch.cat([h[0], c[0]], -1)
        out, h = torch.gru(
            x, state.unsqueeze(0).contiguous(), weights, True, 1, 0.0, train, False, True
        )
        return out, h[0]

    def _torso(self, params: Params, obs: torch.Tensor) -> torch.Tensor:
        """The MLP, on any leading shape."""
        x = obs if obs.is_floating_point() else obs.float()
        for i, layer in enumerate(self.torso):
            if isinstance(layer, nn.Linear):
                x = F.relu(F.linear(x, params[f"torso.{i}.weight"], params[f"torso.{i}.bias"]))
        return x

    def _input_gates(self, params: Params, obs: torch.Tensor) -> torch.Tensor:
        """The MLP and the cell's input half, on any leading shape."""
        return F.linear(self._torso(params, obs), params["gru.weight_ih"], params["gru.bias_ih"])

    def _recur(self, params: Params, gi: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """One step of the cell from its input gates: the next state."""
        if self.cell == "lstm":
            h, c = state.chunk(2, dim=-1)
            gates = gi + F.linear(h, params["gru.weight_hh"], params["gru.bias_hh"])
            i_g, f_g, g_g, o_g = gates.chunk(4, dim=-1)
            c = torch.sigmoid(f_g) * c + torch.sigmoid(i_g) * torch.tanh(g_g)
            h = torch.sigmoid(o_g) * torch.tanh(c)
            return torch.cat([h, c], -1)
        gh = F.linear(state, params["gru.weight_hh"], params["gru.bias_hh"])
        i_r, i_z, i_n = gi.chunk(3, dim=-1)
        h_r, h_z, h_n = gh.chunk(3, dim=-1)
        r = torch.sigmoid(i_r + h_r)
        z = torch.sigmoid(i_z + h_z)
        n = torch.tanh(i_n + r * h_n)
        return (1 - z) * n + z * state

    def _q(self, params: Params, state: torch.Tensor) -> torch.Tensor:
        """Q-values of states (an LSTM's from its ``h``) or of outputs ``h``."""
        h = state[..., : self.state_dim]
        return F.linear(h, params["head.weight"], params["head.bias"])

    def forward(self, obs: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Q-values and the next state under the module's own parameters."""
        return self.apply_params(dict(self.named_parameters()), obs, state)
