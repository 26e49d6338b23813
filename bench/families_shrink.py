"""The one shrink rule of bench/families.py: a family's config class's
defaults made small, then built again by the class so that every field
the class derives from others (a head width, a layer-type list, a state
space mixer's heads) is derived from the small values, as in the family.
"""

from __future__ import annotations

import copy
import dataclasses

VOCAB = 64

# The rule's targets: an attribute the default config has is set to this
# value when its default is larger (so a family whose default is already
# small, or lacks the feature, keeps its own).
SIZES = {
    "vocab_size": VOCAB, "hidden_size": 32, "n_embd": 32, "d_model": 32,
    "embed_dim": 32, "intermediate_size": 48, "ffn_hidden_size": 48,
    "n_inner": 48, "ffn_dim": 48, "num_hidden_layers": 2, "n_layer": 2,
    "num_layers": 2, "n_layers": 2, "num_attention_heads": 4, "n_head": 4,
    "n_heads": 4, "head_dim": 8, "max_position_embeddings": 64,
    "n_positions": 64, "n_ctx": 64, "max_window_layers": 2,
    "moe_intermediate_size": 16, "shared_expert_intermediate_size": 16,
    "expert_intermediate_size": 16, "num_experts": 4, "num_local_experts": 4,
    "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_topk": 2,
    "n_shared_experts": 1, "num_shared_experts": 1, "n_group": 2,
    "topk_group": 1, "kv_lora_rank": 16, "q_lora_rank": 16,
    "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 8,
    "sliding_window": 8, "first_k_dense_replace": 1, "rotary_dim": 4,
    "rotary_emb_base": 10000,
    # Encoder-decoder configs (their CausalLM is the decoder) name their
    # sizes per stack.
    "encoder_layers": 2, "decoder_layers": 2, "num_encoder_layers": 2,
    "num_decoder_layers": 2, "encoder_attention_heads": 4,
    "decoder_attention_heads": 4, "num_encoder_attention_heads": 4,
    "num_decoder_attention_heads": 4, "encoder_ffn_dim": 48,
    "decoder_ffn_dim": 48,
    # A state space mixer's head width (its head count follows, SSM_HEADS);
    # layer counts that must stay under the layers' so that both kinds of
    # layer remain (dense first layers, layers reusing an earlier one's
    # key/value cache).
    "mamba_d_head": 8, "num_dense_layers": 1, "num_kv_shared_layers": 1,
    # Vocabularies and widths of per-layer token inputs (Gemma 3n, 4) and
    # of hashed byte n-grams (BLT).
    "vocab_size_per_layer_input": VOCAB, "hidden_size_per_layer_input": 8,
    "encoder_hash_byte_group_vocab": VOCAB,
    # LongCat-Flash's identity ("zero") experts: half the routed ones, as
    # the default's 256 of 512.
    "zero_expert_num": 2,
}

# Sizes a default config may leave unset (None) that its model cannot be
# built without (the head width derived as hidden / heads in forward code
# that reads config.head_dim; an MoE's experts and experts per token):
# set to SIZES' value. Other unset sizes mean a feature is off
# (sliding_window, q_lora_rank, n_group) and stay unset.
UNSET_SIZES = ("head_dim", "num_experts_per_tok", "n_routed_experts",
               "n_shared_experts")
# Of those, the ones set even where the config has no such field (forward
# code reads them with a fallback); the others only where it has one.
UNSET_ANY = ("head_dim", "num_experts_per_tok")

# (heads, head width, expansion): a state space mixer's heads times their
# width is its inner width, its expansion times the hidden size unless the
# config sets mamba_d_ssm (the configs' own validate_architecture says
# so): the heads follow the shrunk sizes.
SSM_HEADS = (("num_heads", "head_dim", "expand"),
             ("mamba_n_heads", "mamba_d_head", "mamba_expand"))


SHARED0 = {}  # id(config) -> its num_kv_shared_layers before the sizes


def _get(config, key):
    """config.key, None when it has none or it is per-layer (transformers
    refuses a global read of an attribute that may vary by layer)."""
    try:
        return getattr(config, key, None)
    except Exception:  # noqa: BLE001 - AmbiguousGlobalPerLayerAttributeError
        return None


def _set(config, key, value):
    try:
        setattr(config, key, value)
    except (NotImplementedError, AttributeError):
        pass  # a derived attribute: its parts are in SIZES


def _is_config(v):
    return hasattr(v, "to_dict") and dataclasses.is_dataclass(v)


def _sizes(config):
    """The sizes part of the rule, in place, on the config and every
    sub-config it holds (a multimodal model's text_config): SIZES above,
    key/value heads 4 when the default has as many as query heads (or
    leaves them unset: multi-head) and 2 otherwise, list attributes with
    one entry per layer cut to the kept layers (_kept_layers: every layer
    kind the default has stays; a per-layer size list also shrunk), the
    UNSET_SIZES a default leaves None set as SIZES says, the SSM_HEADS
    relation, token ids past the vocabulary moved to its last ids, dropout
    off."""
    # A config may hold sub-configs, or a list of per-layer ones (each
    # shrunk alike, so the global values may be read and set meanwhile).
    per_layer = hasattr(type(config),
                        "allow_global_per_layer_attribute_access")
    if per_layer:
        config.allow_global_per_layer_attribute_access = True
    subs = [getattr(config, k) for k in vars(config)
            if hasattr(getattr(config, k), "to_dict")]
    subs += [c for k in vars(config) if isinstance(getattr(config, k), list)
             for c in getattr(config, k) if hasattr(c, "to_dict")]
    for sub in subs:
        _sizes(sub)
    layers0 = next((_get(config, k) for k in
                    ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
                    if isinstance(_get(config, k), int)), None)
    heads0 = _get(config, "num_attention_heads")
    SHARED0[id(config)] = vars(config).get("num_kv_shared_layers")
    for key, small in SIZES.items():
        v = _get(config, key)
        if v is None and key in UNSET_SIZES and (
                key in UNSET_ANY or key in vars(config)):
            _set(config, key, small)
        elif isinstance(v, int) and not isinstance(v, bool) and v > small:
            _set(config, key, small)
    kv = _get(config, "num_key_value_heads")
    if isinstance(heads0, int) and "num_key_value_heads" in vars(config) \
            and (kv is None or isinstance(kv, int)):
        config.num_key_value_heads = 4 if kv in (None, heads0) else 2
    for heads, width, expand in SSM_HEADS:
        vals = [_get(config, k) for k in (heads, width, expand)]
        hidden = _get(config, "hidden_size")
        if all(isinstance(v, int) for v in vals + [hidden]):
            inner = _get(config, "mamba_d_ssm")
            inner = inner if isinstance(inner, int) else vals[2] * hidden
            _set(config, heads, inner // vals[1])
    layers = next((_get(config, k) for k in
                   ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
                   if isinstance(_get(config, k), int)), None)
    # Every layer reusing a key/value cache (an assistant reading its
    # target model's) stays every layer.
    if layers0 and vars(config).get("num_kv_shared_layers") == 1 and \
            SHARED0.get(id(config)) == layers0:
        config.num_kv_shared_layers = layers
    keep = list(range(layers or 0))
    if layers0 and layers and layers < layers0:
        # Layers reusing an earlier layer's key/value cache (Gemma 3n's
        # last ones) read the last own-cache layer of their kind: every
        # kind is kept among the own-cache layers, the shared ones are the
        # default's first shared ones.
        shared = vars(config).get("num_kv_shared_layers")
        shared0 = SHARED0.get(id(config))
        if isinstance(shared, int) and isinstance(shared0, int) and \
                0 < shared < layers and shared0 < layers0:
            keep = _kept_layers(config, layers0, layers - shared,
                                layers0 - shared0)
            keep += list(range(layers0 - shared0, layers0))[:shared]
        else:
            keep = _kept_layers(config, layers0, layers)
        if len(keep) > layers:
            for key in LAYER_COUNTS:
                if isinstance(_get(config, key), int):
                    _set(config, key, len(keep))
        _periods(config, layers0, keep)
    for key in list(vars(config)):
        v = getattr(config, key)
        if isinstance(v, list) and layers0 and len(v) == layers0 and \
                layers < layers0:
            v = [v[i] for i in keep]
            small = SIZES.get(key)
            if small and all(isinstance(x, int) for x in v):
                v = [min(x, small) for x in v]
            setattr(config, key, v)
        elif key.endswith("token_id") and isinstance(v, int) and v >= VOCAB:
            setattr(config, key, VOCAB - 1)
        elif key.endswith("dropout") or key.endswith("pdrop") or \
                key.endswith("dropout_prob") or key.endswith("dropout_rate"):
            if isinstance(v, float):
                setattr(config, key, 0.0)
    if per_layer:
        config.allow_global_per_layer_attribute_access = False
    return config


LAYER_COUNTS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")


def _kind_lists(config, layers0):
    """The config's per-layer kinds: each list with one str or bool entry
    per layer (layer_types, mlp_layer_types, layers_block_type), or where
    it holds none (the model reads the list when there is one: Zamba's
    default list is not its period's), each X_period / X_offset pair (a
    layer of the kind where index % period == offset: Jamba's attention
    and expert layers) as such a list."""
    held = vars(config)
    lists = [v for v in held.values() if isinstance(v, list) and
             len(v) == layers0 and all(isinstance(x, (str, bool)) for x in v)]
    for period, offset in ([] if lists else _period_pairs(config).values()):
        lists.append([i % period == offset for i in range(layers0)])
    return lists


def _period_pairs(config):
    """{X_period key: (period, offset)} of the config's period pairs."""
    held, out = vars(config), {}
    for key, period in held.items():
        offset = held.get(key[:-len("period")] + "offset")
        if key.endswith("_period") and isinstance(period, int) and \
                isinstance(offset, int) and 0 <= offset < period:
            out[key] = (period, offset)
    return out


def _kept_layers(config, layers0, layers, span=None):
    """The default's layers the shrunk model keeps, in order: the first
    layer of every kind of every per-layer kind list (so a hybrid keeps an
    attention and a state space layer, a dense-first MoE a dense and an
    MoE layer), then the first others up to `layers`; of the first `span`
    layers only (all by default)."""
    span = layers0 if span is None else span
    need = {lst.index(kind) for lst in _kind_lists(config, layers0)
            for kind in set(lst[:span])}
    rest = [i for i in range(span) if i not in need]
    return sorted(need | set(rest[:max(0, layers - len(need))]))


def _periods(config, layers0, keep):
    """Each X_period / X_offset pair set so that the kept layers have the
    kinds they had in the default (the smallest period that gives them)."""
    for key, (period, offset) in _period_pairs(config).items():
        want = [i % period == offset for i in keep]
        n = len(keep)
        found = next(((p, o) for p in range(1, n + 1) for o in range(p)
                      if [j % p == o for j in range(n)] == want), None)
        if found:
            _set(config, key, found[0])
            _set(config, key[:-len("period")] + "offset", found[1])


def _rebuild(shrunk, default):
    """type(shrunk) built again from shrunk's values, so its __post_init__
    and validators run on them. A field the class declares None by
    default, that the default config's __post_init__ filled in (derived
    from other fields: a qk head width, a head count per query group) and
    the shrink left as it was, is left out and so derived again from the
    shrunk fields. Sub-configs are rebuilt first; attributes the default
    lacks (set by FAMILY_FIELDS) are passed on."""
    held, orig = _fields(shrunk), _fields(default)
    kw = {}
    for f in dataclasses.fields(shrunk):
        if not f.init or f.name not in held:
            continue
        v = held[f.name]
        if _is_config(v):
            kw[f.name] = _rebuild(v, orig.get(f.name) if _is_config(
                orig.get(f.name)) else v)
            continue
        if isinstance(v, list) and any(_is_config(c) for c in v):
            was = orig.get(f.name) or []
            kw[f.name] = [_rebuild(c, was[i] if i < len(was) else c)
                          if _is_config(c) else c for i, c in enumerate(v)]
            continue
        declared_none = f.default is None
        derived = declared_none and orig.get(f.name) is not None
        if derived and v == orig.get(f.name):
            continue
        kw[f.name] = v
    for k, v in vars(shrunk).items():
        if k not in vars(default) and not k.startswith("_") and \
                k not in kw and k not in held:
            kw[k] = v
    return type(shrunk)(**kw)


def _fields(config):
    """{field: value} of a config's init fields, read as its model reads
    them (through attribute_map: qwen3_moe's num_experts is held as
    num_local_experts)."""
    per_layer = hasattr(type(config),
                        "allow_global_per_layer_attribute_access")
    if per_layer:
        config.allow_global_per_layer_attribute_access = True
    out = {}
    for f in dataclasses.fields(config):
        if f.name == "allow_global_per_layer_attribute_access":
            continue
        if f.init and (f.name in vars(config) or hasattr(config, f.name)):
            try:
                out[f.name] = getattr(config, f.name)
            except Exception:  # noqa: BLE001 - a per-layer attribute
                out[f.name] = vars(config).get(f.name)
    if per_layer:
        config.allow_global_per_layer_attribute_access = False
    return out


def _dbrx(config):
    # DbrxAttention reads attn_config.rope_theta, which the released
    # checkpoints' attn_config holds and the default one lacks: the
    # model's own rope_theta. It clamps q, k, v to +-clip_qkv, which the
    # default leaves None (torch.clamp refuses both bounds None): the
    # released DBRX configs' 8.
    config.attn_config.rope_theta = config.rope_parameters["rope_theta"]
    if config.attn_config.clip_qkv is None:
        config.attn_config.clip_qkv = 8.0


def _blt(config):
    # The local encoder and decoder read the global transformer's width
    # as their hidden_size_global.
    for sub in (config.encoder_config, config.decoder_config):
        sub.hidden_size_global = config.global_config.hidden_size


def _per_layer_rope(config):
    # Its rotary embedding reads rope_parameters[layer_type] (None: a
    # layer without rotary positions); the default leaves the dict empty:
    # each layer type gets the default rotary embedding at the class's
    # default_theta.
    if not config.rope_parameters:
        config.rope_parameters = {
            t: {"rope_type": "default", "rope_theta": config.default_theta}
            for t in sorted(set(config.layer_types))}


def _lfm2_moe(config):
    # The default leaves layer_types unset and the model indexes it: a
    # short-convolution layer then an attention layer, the order of the
    # released LFM2 models' first layers, so both kinds are built.
    if config.layer_types is None:
        config.layer_types = ["conv", "full_attention"][
            :config.num_hidden_layers]


def _musicgen(config):
    # The decoder reads its input_ids as (batch x codebooks, sequence);
    # the bench's rows are single sequences split one per microbatch, so
    # one codebook (the stack of heads has one head).
    config.decoder.num_codebooks = 1


def _reformer(config):
    # ReformerModelWithLMHead asserts is_decoder (causal self-attention),
    # and its reversible layers take a backward only in train mode
    # (TRAIN_MODE), where a sequence is exactly the axial position shape's
    # product (the default's 64 x 64 is its 4096 positions): 4 x 4 for
    # the bench's 16 tokens, in chunks of 8 (two chunks, as 4096 is 64 of
    # 64); the axial embedding's widths sum to the hidden size, scaled as
    # the default's. LSH attention draws random rotations each forward:
    # hash_seed fixes them. attn_layers, a tuple, is cut to the first
    # layers (it sets num_hidden_layers).
    config.is_decoder = True
    config.attn_layers = list(config.attn_layers)[:2]
    dims = list(config.axial_pos_embds_dim)
    config.axial_pos_embds_dim = [
        d * config.hidden_size // sum(dims) for d in dims]
    config.axial_pos_shape = [4, 4]
    config.local_attn_chunk_length = config.lsh_attn_chunk_length = 8
    config.hash_seed = 0


def _gpt_neo(config):
    # attention_layers (global and local layers, cut to the first layers)
    # is derived from attention_types ([[pattern, repeats]]): the pattern
    # of the cut layers once.
    config.attention_types = [[list(config.attention_layers), 1]]


def _olmo_hybrid(config):
    # Its validator wants an attention layer besides the linear ones; the
    # released pattern ends each group of layers with one: so does the cut.
    config.layer_types = config.layer_types[:-1] + ["full_attention"]


def _dots3_note(config):
    # Its vision and audio towers feed their adapters their own hidden
    # state and the adapters feed the text model its (validate_architecture:
    # adapter_in_dim and adapter_input_size match the tower's hidden_size,
    # adapter_out_dim the text model's).
    for sub in _configs(config):
        for key in ("adapter_in_dim", "adapter_input_size"):
            if key in vars(sub):
                setattr(sub, key, sub.hidden_size)
        if "adapter_out_dim" in vars(sub):
            sub.adapter_out_dim = config.text_config.hidden_size


def _configs(config):
    """config and every sub-config it holds, depth first."""
    yield config
    for v in vars(config).values():
        if _is_config(v):
            yield from _configs(v)


def _zamba(config):
    # Every hybrid layer's shared transformer is tied to the first one's
    # (_tied_weights_keys), and the model refuses a tie that matches no
    # other layer: a second hybrid layer after the kept one.
    if config.layers_block_type.count("hybrid") == 1:
        config.layers_block_type = config.layers_block_type + ["hybrid"]
        config.num_hidden_layers = len(config.layers_block_type)


def _qsa(config):
    # The default's indexed_attention layers build the QSA token indexer,
    # whose fields the default leaves unset (its model cannot be built
    # once such a layer is kept): one key head (as the class requires),
    # two query heads of the attention's head width, 4-token blocks, a
    # budget of two blocks.
    for sub in _configs(config):
        if "indexer_budget" in vars(sub) and sub.indexer_budget is None:
            sub.indexer_n_heads, sub.indexer_kv_heads = 2, 1
            sub.indexer_head_dim = sub.head_dim
            sub.indexer_compress_ratio, sub.indexer_budget = 4, 8


def _xmod(config):
    # X-MOD routes every token through the adapter of its language and
    # refuses to guess one: its first (the default config's only) one.
    config.default_language = config.languages[0]


# Per family: fields its default config leaves out or inconsistent that
# its model reads, set from the config's own values (after the sizes,
# before the class builds the config again).
FAMILY_FIELDS = {
    "blt": _blt,
    "dbrx": _dbrx,
    "dots3_note": _dots3_note,
    "gpt_neo": _gpt_neo,
    "olmo_hybrid": _olmo_hybrid,
    "cohere_compass_text": _per_layer_rope,
    "lfm2_moe": _lfm2_moe,
    "musicgen": _musicgen,
    "musicgen_melody": _musicgen,
    "reformer": _reformer,
    "qwen4_exp": _qsa,
    "qwen4_exp_text": _qsa,
    "xmod": _xmod,
    "zamba": _zamba,
}


def _gemma4_assistant(cls):
    # The class's own default fails its validator: an assistant's text
    # model has no per-layer inputs, MoE block or double-wide MLP, and
    # every layer reuses its target model's key/value cache (its
    # __post_init__ sets num_kv_shared_layers to the layers).
    from transformers import Gemma4TextConfig
    return cls(text_config=Gemma4TextConfig(
        hidden_size_per_layer_input=0, vocab_size_per_layer_input=0,
        enable_moe_block=False, use_double_wide_mlp=False))


# Families PyTorch trains only in train mode (dropout is off all the same).
TRAIN_MODE = ("reformer",)

# Families whose config class's default fails the class's own validation:
# the default the family's validator accepts.
FAMILY_DEFAULTS = {"gemma4_assistant": _gemma4_assistant}


def default_config(family):
    """The family's config class's default (FAMILY_DEFAULTS where the
    class refuses its own)."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    if family in FAMILY_DEFAULTS:
        return FAMILY_DEFAULTS[family](CONFIG_MAPPING[family])
    return CONFIG_MAPPING[family]()


def shrink(config, family=None):
    """The rule on a family's default config: a new config of the same
    class (the default is left as it was)."""
    small = _sizes(copy.deepcopy(config))
    fix = FAMILY_FIELDS.get(family or getattr(config, "model_type", ""))
    if fix:
        fix(small)
    return _rebuild(small, config)
