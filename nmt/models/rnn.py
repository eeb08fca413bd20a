"""RNN encoder-decoders: fixed context (Cho 2014), Bahdanau (2015), Luong (2015).

Each decoder is written as a single step over batch-first state; the shared
teacher-forcing loop in `RNNSeq2Seq` runs the same step for training.
Shapes: B batch, S source, H hidden, E embedding, V vocabulary.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from nmt.core.config import LocalConfig, ModelConfig
from nmt.core.tokens import PAD
from nmt.models.attention import SCORERS, AdditiveScore, LocalWindow, attend
from nmt.models.base import RNNSeq2Seq, State

CELLS = {"gru": nn.GRUCell, "lstm": nn.LSTMCell}
RNNS = {"gru": nn.GRU, "lstm": nn.LSTM}


class Encoder(nn.Module):
    """Embedding + (bi)directional multi-layer RNN over packed (unpadded) sequences."""

    def __init__(self, vocab: int, cfg: ModelConfig, embedding: nn.Embedding | None = None):
        super().__init__()
        self.embed = embedding or nn.Embedding(vocab, cfg.emb_size, padding_idx=PAD)
        self.rnn = RNNS[cfg.rnn_type](cfg.emb_size, cfg.hidden_size, cfg.enc_layers,
                                      batch_first=True, bidirectional=cfg.bidirectional,
                                      dropout=cfg.dropout if cfg.enc_layers > 1 else 0.0)
        self.drop = nn.Dropout(cfg.dropout)
        self.dirs = 2 if cfg.bidirectional else 1

    def forward(self, src: Tensor, emb: Tensor | None = None
                ) -> tuple[Tensor, Tensor, Tensor, State]:
        """src (B, S) -> states (B, S, dirs*H), mask (B, S), final (B, dirs*H) of the top
        layer, and the forward direction's final h (and c) of every layer, (B, L, H) each.
        `emb` (B, S, E) replaces the looked-up embeddings of `src`."""
        mask = src != PAD
        lengths = mask.sum(1).cpu()
        emb = self.embed(src) if emb is None else emb
        packed = pack_padded_sequence(self.drop(emb), lengths, batch_first=True,
                                      enforce_sorted=False)
        out, hidden = self.rnn(packed)
        states, _ = pad_packed_sequence(out, batch_first=True, total_length=src.size(1))
        h_n = hidden[0] if isinstance(hidden, tuple) else hidden  # (layers*dirs, B, H)
        final = torch.cat([h_n[-d] for d in range(self.dirs, 0, -1)], dim=-1)  # (B, dirs*H)
        layers = {"h": h_n[::self.dirs].transpose(0, 1)}  # forward direction: (B, L, H)
        if isinstance(hidden, tuple):
            layers["c"] = hidden[1][::self.dirs].transpose(0, 1)
        return self.drop(states), mask, final, layers


class StackedCell(nn.Module):
    """A stack of GRU/LSTM cells; state h (and c) kept batch-first as (B, L, H)."""

    def __init__(self, input_size: int, cfg: ModelConfig):
        super().__init__()
        cell = CELLS[cfg.rnn_type]
        sizes = [input_size] + [cfg.hidden_size] * (cfg.dec_layers - 1)
        self.cells = nn.ModuleList(cell(s, cfg.hidden_size) for s in sizes)
        self.lstm = cfg.rnn_type == "lstm"
        self.drop = nn.Dropout(cfg.dropout)

    def initial(self, h0: Tensor, c0: Tensor | None = None) -> State:
        """h0 (B, L, H) -> state dict (LSTM cells start at c0, or at zero)."""
        if not self.lstm:
            return {"h": h0}
        return {"h": h0, "c": torch.zeros_like(h0) if c0 is None else c0}

    def forward(self, x: Tensor, state: State) -> tuple[Tensor, State]:
        hs, cs = [], []
        for layer, cell in enumerate(self.cells):
            if self.lstm:
                h, c = cell(x, (state["h"][:, layer], state["c"][:, layer]))
                cs.append(c)
            else:
                h = cell(x, state["h"][:, layer])
            hs.append(h)
            x = self.drop(h) if layer + 1 < len(self.cells) else h
        new = {"h": torch.stack(hs, 1)}
        if self.lstm:
            new["c"] = torch.stack(cs, 1)
        return x, new


class _RNNModel(RNNSeq2Seq):
    """Parts every RNN family shares: encoder, decoder embedding, init bridge, readout.

    `bridge_input` None: no bridge (the decoder copies the encoder's states);
    `readout_input` None: no readout layer (the softmax reads the decoder's output).
    """

    def __init__(self, src_vocab: int, tgt_vocab: int, cfg: ModelConfig, joint: bool,
                 rnn_input: int, bridge_input: int | None, readout_input: int | None):
        out_size = cfg.emb_size if readout_input else cfg.hidden_size
        super().__init__(src_vocab, tgt_vocab, out_size, cfg.tie_embeddings)
        self.cfg = cfg
        self.tgt_embed = nn.Embedding(tgt_vocab, cfg.emb_size, padding_idx=PAD)
        nn.init.normal_(self.tgt_embed.weight, std=cfg.emb_size ** -0.5)  # sane tied logits
        shared = self.tgt_embed if (joint and cfg.tie_embeddings) else None
        self.encoder = Encoder(src_vocab, cfg, shared)
        self.bridge = (nn.Linear(bridge_input, cfg.dec_layers * cfg.hidden_size)
                       if bridge_input else None)
        self.cell = StackedCell(rnn_input, cfg)
        pieces = 2 if cfg.readout == "maxout" else 1  # maxout: 2 candidates per unit
        self.readout = nn.Linear(readout_input, pieces * cfg.emb_size) if readout_input else None
        self.drop = nn.Dropout(cfg.dropout)
        self.tie_weights(self.tgt_embed)

    def embed_source(self, src: Tensor) -> Tensor:
        return self.encoder.embed(src)  # (B, S, E)

    def embed_target(self, ids: Tensor) -> Tensor:
        return self.drop(self.tgt_embed(ids))  # y_{t-1}: (B, E) or (B, T, E)

    def _initial_hidden(self, source: Tensor) -> Tensor:
        """s_0 = tanh(W_s source) for every decoder layer: (B, L, H)."""
        h0 = torch.tanh(self.bridge(source))
        return h0.view(source.size(0), self.cfg.dec_layers, self.cfg.hidden_size)

    def read(self, features: Tensor) -> Tensor:
        """Deep output of embedding size E, fed to the softmax layer: t~ = W_o x + b over a
        step's features x (for Cho and Bahdanau [s_t; y_{t-1}; c]), maxout t_j =
        max(t~_{2j-1}, t~_{2j}) (Cho 2014 eq. 12; Bahdanau 2015 A.2.2), or tanh(t~); the
        features themselves without a readout layer (Luong's h~_t)."""
        if self.readout is None:
            return features
        pre = self.readout(features)  # (..., 2E) maxout, (..., E) tanh
        if self.cfg.readout == "maxout":
            return self.drop(pre.view(*pre.shape[:-1], -1, 2).amax(-1))
        return self.drop(torch.tanh(pre))

    def logits(self, features: Tensor) -> Tensor:
        """The readout does not feed the recurrence, so it runs here, after the step loop:
        in training once over the real target positions (Seq2Seq.forward's `select`),
        not once per step over every row."""
        return self.out(self.read(features))


class FixedContext(_RNNModel):
    """Cho et al. (2014): c = tanh(V h_N) is all the decoder sees of the source.

    s_t = f(s_{t-1}, y_{t-1}, c), s_0 = tanh(W c); p(y_t) = g(s_t, y_{t-1}, c).
    """

    has_attention = False

    def __init__(self, src_vocab: int, tgt_vocab: int, cfg: ModelConfig, joint: bool,
                 local: LocalConfig = LocalConfig()):
        H = cfg.hidden_size
        super().__init__(src_vocab, tgt_vocab, cfg, joint, cfg.emb_size + H, H,
                         2 * H + cfg.emb_size)
        self.context = nn.Linear(H * (2 if cfg.bidirectional else 1), H)

    def encode(self, src: Tensor, src_emb: Tensor | None = None) -> State:
        _, mask, final, _ = self.encoder(src, src_emb)
        return {"mask": mask, "context": torch.tanh(self.context(final))}  # (B, H)

    def init_state(self, enc: State) -> State:
        return self.cell.initial(self._initial_hidden(enc["context"]))

    def step_embedded(self, emb: Tensor, state: State, enc: State):
        out, state = self.cell(torch.cat([emb, enc["context"]], -1), state)
        return torch.cat([out, emb, enc["context"]], -1), state, None  # read by `logits`


class Bahdanau(_RNNModel):
    """Bahdanau et al. (2015): e_tj = v^T tanh(W s_{t-1} + U h_j + b) on the previous
    state; c_t = sum_j a_tj h_j enters the GRU with y_{t-1}; output g(s_t, y_{t-1}, c_t).
    """

    def __init__(self, src_vocab: int, tgt_vocab: int, cfg: ModelConfig, joint: bool,
                 local: LocalConfig = LocalConfig()):
        H, enc_out = cfg.hidden_size, cfg.hidden_size * (2 if cfg.bidirectional else 1)
        super().__init__(src_vocab, tgt_vocab, cfg, joint, cfg.emb_size + enc_out, H,
                         H + enc_out + cfg.emb_size)
        self.score = AdditiveScore(H, enc_out, H)

    def encode(self, src: Tensor, src_emb: Tensor | None = None) -> State:
        states, mask, final, _ = self.encoder(src, src_emb)
        # s_0 = tanh(W_s h<-_1): the backward state at the first word (its last step);
        # a unidirectional encoder uses its final state instead.
        init = final[:, -self.cfg.hidden_size:]
        return {"states": states, "mask": mask, "keys": self.score.project_keys(states),
                "init": init}

    def init_state(self, enc: State) -> State:
        return self.cell.initial(self._initial_hidden(enc["init"]))

    def step_embedded(self, emb: Tensor, state: State, enc: State):
        query = state["h"][:, -1:]  # s_{t-1}, top layer: (B, 1, H)
        scores = self.score(query, enc["keys"])  # (B, 1, S)
        context, weights = attend(scores, enc["states"], enc["mask"].unsqueeze(1))
        context = context.squeeze(1)
        out, state = self.cell(torch.cat([emb, context], -1), state)
        return torch.cat([out, emb, context], -1), state, weights[:, None, None, 0]


class Luong(_RNNModel):
    """Luong et al. (2015): attend with the current state h_t; attentional vector
    h~_t = tanh(W_c [c_t; h_t]) (eq. 5) feeds the softmax and (input feeding) the next step.

    `memory`: "states" attends over the encoder's states h_s as they are (the paper);
    "projected" first maps a bidirectional encoder's 2H states to H with a learned
    matrix. `decoder_init`: "copy" starts every decoder layer from the encoder's final
    state of the same layer (the paper; the forward direction of a bidirectional
    encoder); "bridge" uses s_0 = tanh(W h_N) for every layer.
    """

    def __init__(self, src_vocab: int, tgt_vocab: int, cfg: ModelConfig, joint: bool,
                 local: LocalConfig = LocalConfig()):
        H = cfg.hidden_size
        feed = H if cfg.input_feeding else 0
        enc_out = H * (2 if cfg.bidirectional else 1)
        if cfg.decoder_init == "copy" and cfg.enc_layers != cfg.dec_layers:
            raise ValueError("decoder_init copy needs enc_layers == dec_layers")
        bridge = enc_out if cfg.decoder_init == "bridge" else None
        super().__init__(src_vocab, tgt_vocab, cfg, joint, cfg.emb_size + feed, bridge, None)
        projected = cfg.memory == "projected" and enc_out != H
        self.memory = nn.Linear(enc_out, H, bias=False) if projected else nn.Identity()
        mem = H if projected else enc_out  # size of h_s as the score and context see it
        self.score = SCORERS[cfg.score](H, mem, H)
        self.local = (LocalWindow(cfg.attention, cfg.window, H, cfg.gaussian, local,
                                  cfg.position_prior)
                      if cfg.attention != "global" else None)
        self.W_c = nn.Linear(mem + H, H, bias=False)

    def encode(self, src: Tensor, src_emb: Tensor | None = None) -> State:
        states, mask, final, layers = self.encoder(src, src_emb)
        memory = self.memory(states)  # (B, S, H or dirs*H)
        enc = {"states": memory, "mask": mask, "keys": self.score.project_keys(memory)}
        if self.bridge is not None:
            enc["init"] = final
        else:
            enc.update({f"init_{k}": v for k, v in layers.items()})  # (B, L, H)
        return enc

    def init_state(self, enc: State) -> State:
        if self.bridge is not None:
            state = self.cell.initial(self._initial_hidden(enc["init"]))
        else:
            state = self.cell.initial(enc["init_h"], enc.get("init_c"))
        batch = enc["mask"].size(0)
        state["t"] = torch.zeros(batch, dtype=torch.long, device=enc["mask"].device)
        if self.cfg.input_feeding:
            state["feed"] = enc["states"].new_zeros(batch, self.cfg.hidden_size)
        return state

    def at_step(self, step: int) -> None:
        """The local window's curriculum (local.window_start), if any."""
        if self.local is not None:
            self.local.at_step(step)

    def step_embedded(self, emb: Tensor, state: State, enc: State):
        inputs = torch.cat([emb, state["feed"]], -1) if self.cfg.input_feeding else emb
        t = state["t"]
        h, new = self.cell(inputs, {k: v for k, v in state.items() if k in ("h", "c")})
        query = h.unsqueeze(1)  # h_t: (B, 1, H)
        scores = self.score(query, enc["keys"])  # (B, 1, S)
        if self.local is None:
            context, weights = attend(scores, enc["states"], enc["mask"].unsqueeze(1))
        else:
            context, weights, aux = self.local.attend(scores, enc["states"], query,
                                                      t.unsqueeze(1), enc["mask"])
            if aux is not None:  # the training aids' terms (local.*): RNNSeq2Seq takes them
                new["aux"] = aux.squeeze(1)
        attentional = self.drop(torch.tanh(self.W_c(torch.cat([context.squeeze(1), h], -1))))
        new["t"] = t + 1
        if self.cfg.input_feeding:
            new["feed"] = attentional
        return attentional, new, weights[:, None, None, 0]
