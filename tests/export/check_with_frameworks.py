"""`meshplan export`'s output, read by the frameworks' own parsers and schemas.

Run by CTest ("export: ...") with the python of scripts/install_framework_refs.sh, which holds
megatron-core 0.16.1, megatron-bridge 0.3.1, torchtitan 0.2.2 and deepspeed 0.19.8 (no GPU
needed). For each plan below it runs `meshplan export --to TARGET` and hands the text to:

  torchtitan       ConfigManager.parse_args(["--job.config_file", toml]) (the real parser:
                   unknown sections or keys and wrong types fail), then ParallelDims (its
                   degrees against the world size), then the module names of each pipeline
                   part against the submodules torchtitan's Llama 3 Transformer assigns (read
                   from its source: importing the model needs tensorboard and torchdata).
  deepspeed        DeepSpeedConfig(ds_config, mpu) (the real config class and its pydantic
                   ZeRO schema, with a stand-in mpu that reports the plan's dp degree).
  megatron         Megatron-LM's pretrain_gpt.py parser (megatron/training/arguments.py) is not
                   in any installed package (the megatron-core wheel ships megatron/core only),
                   so each flag's argparse destination is checked against the names read from
                   the installed source: the fields of megatron-core's TransformerConfig,
                   MLATransformerConfig, DistributedDataParallelConfig and OptimizerConfig (the
                   dataclasses Megatron-LM builds its flags from), megatron-bridge's config
                   dataclasses, and the `args.<name>` attributes megatron-bridge's mlm_compat
                   reads from Megatron-LM's namespace (one flag none of them names,
                   --num-virtual-stages-per-pipeline-rank, was checked by hand against
                   arguments.py core_v0.16.1 line 2230). The TransformerConfig fields are then
                   built into a real TransformerConfig, whose __post_init__ checks them.
  megatron-bridge  the overrides through Megatron-Bridge's own parse_hydra_overrides, applied in
                   struct mode to the ConfigContainer's members as OmegaConf sees them (the
                   megatron-core dataclasses imported; megatron-bridge's own read with `ast`,
                   since its config module does not import without Transformer Engine), the
                   mixed_precision against the registered recipes, and the model.* values
                   built into a TransformerConfig as above.
  torchrun         the launch line through torch.distributed.run's own argument parser, and the
                   sbatch script through `bash -n`.
And refusals: each target refuses a plan it cannot express with exit 2, naming the knob.
"""
import argparse
import ast
import dataclasses
import importlib.util
import json
import os
import shlex
import subprocess
import sys
import tempfile
import typing

parser = argparse.ArgumentParser()
parser.add_argument("--meshplan", required=True)
ARGS = parser.parse_args()

FAILURES = []


def check(condition, what):
    if not condition:
        FAILURES.append(what)
        print("FAIL:", what)


def plan_file(folder, name, model, cluster, plan, precision="mixed", global_batch=64, seq=4096,
              framework="megatron-core"):
    path = os.path.join(folder, name + ".yaml")
    lines = [f"model: {model}", f"cluster: {cluster}", "training:",
             f"  global_batch: {global_batch}", f"  seq_len: {seq}", f"  precision: {precision}",
             f"  framework: {framework}", "plan:"] + [f"  {k}: {v}" for k, v in (item.split("=") for item in plan.split(","))]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def export(path, target):
    r = subprocess.run([ARGS.meshplan, "export", path, "--to", target], capture_output=True, text=True)
    if r.returncode != 0:
        FAILURES.append(f"export {path} --to {target}: exit {r.returncode}: {r.stderr}")
        print("FAIL:", r.stderr)
        return None
    return r.stdout


def bash_array(text, name):
    r = subprocess.run(["bash", "-c", text + f'\nprintf "%s\\0" "${{{name}[@]}}"'],
                       capture_output=True, text=True, check=True)
    return [item for item in r.stdout.split("\0") if item]


# ---- Megatron-Core names, from the installed source ---------------------------------------

from megatron.core.datasets.gpt_dataset import GPTDatasetConfig
from megatron.core.distributed import DistributedDataParallelConfig
from megatron.core.optimizer import OptimizerConfig
from megatron.core.transformer.transformer_config import MLATransformerConfig, TransformerConfig

SITE = os.path.dirname(os.path.dirname(importlib.util.find_spec("megatron.core").origin))
BRIDGE = os.path.join(SITE, "bridge")


def ast_fields(path, class_name):
    """Annotated fields of a dataclass in a source file (and of its bases in the same file)."""
    tree = ast.parse(open(path).read())
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    names, todo = set(), [class_name]
    while todo:
        node = classes.get(todo.pop())
        if node is None:
            continue
        names |= {s.target.id for s in node.body
                  if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
        todo += [b.id for b in node.bases if isinstance(b, ast.Name)]
    return names


def fields(cls):
    return {f.name for f in dataclasses.fields(cls)}


BRIDGE_CONFIG = os.path.join(BRIDGE, "training", "config.py")
SECTIONS = {  # ConfigContainer's members (megatron/bridge/training/config.py)
    "model": fields(MLATransformerConfig) | ast_fields(os.path.join(BRIDGE, "models", "gpt_provider.py"),
                                                       "GPTModelProvider"),
    "ddp": fields(DistributedDataParallelConfig) | ast_fields(BRIDGE_CONFIG, "DistributedDataParallelConfig"),
    "optimizer": fields(OptimizerConfig) | ast_fields(BRIDGE_CONFIG, "OptimizerConfig"),
    "train": ast_fields(BRIDGE_CONFIG, "TrainingConfig"),
    "dataset": fields(GPTDatasetConfig) | ast_fields(BRIDGE_CONFIG, "DataloaderConfig"),
    "checkpoint": ast_fields(BRIDGE_CONFIG, "CheckpointConfig"),
}
check("sequence_length" in SECTIONS["dataset"] and "micro_batch_size" in SECTIONS["train"],
      "megatron-bridge's config dataclasses were read")
MIXED_PRECISION = {f.name for f in ast.parse(open(os.path.join(BRIDGE, "training", "mixed_precision.py")).read()).body
                   if isinstance(f, ast.FunctionDef)
                   and any(isinstance(d, ast.Name) and d.id == "register" for d in f.decorator_list)}
MLM_ARGS = set()  # `args.<name>` that megatron-bridge's mlm_compat reads from Megatron-LM
for root, _, files in os.walk(os.path.join(BRIDGE, "training", "mlm_compat")):
    for name in files:
        if name.endswith(".py"):
            tree = ast.parse(open(os.path.join(root, name)).read())
            MLM_ARGS |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
                         and isinstance(n.value, ast.Name) and n.value.id == "args"}


def factory_flags(cls):
    """The flags Megatron-LM's ArgumentGroupFactory (megatron/training/argument_utils.py,
    core_v0.16.1) builds from a config dataclass: a field's argparse_meta arg_names, else
    --no-/--disable-<field> for a bool that defaults to True, else --<field>, dashed."""
    flags = {}
    for f in dataclasses.fields(cls):
        meta = (f.metadata or {}).get("argparse_meta", {})
        names = meta.get("arg_names")
        if names is None:
            dashed = f.name.replace("_", "-")
            names = ([f"--no-{dashed}", f"--disable-{dashed}"] if f.default is True else [f"--{dashed}"])
        for name in names:
            flags[name] = f.name
    return flags


# flag -> the field it sets: megatron-core's dataclasses as the factory names them, the
# dataclasses of megatron-bridge (whose fields keep Megatron-LM's argument names), and the
# `args.<name>` attributes of Megatron-LM's namespace that megatron-bridge's mlm_compat reads.
MEGATRON_FLAGS = {}
for cls in (MLATransformerConfig, DistributedDataParallelConfig, OptimizerConfig):
    MEGATRON_FLAGS.update(factory_flags(cls))
for name in set().union(*SECTIONS.values()) | MLM_ARGS:
    MEGATRON_FLAGS.setdefault("--" + name.replace("_", "-"), name)
# Flags no installed package names: checked by hand against Megatron-LM core_v0.16.1's
# megatron/training/arguments.py (docs/export.md gives the line of each).
# The flags no installed package names, checked by hand against Megatron-LM core_v0.16.1's
# megatron/training/arguments.py (lines 2230 and 2232; docs/export.md); the second is a
# store_false switch.
BY_HAND = {"--num-virtual-stages-per-pipeline-rank": "virtual_pipeline_model_parallel_size",
           "--no-overlap-p2p-communication": "overlap_p2p_comm"}
STORE_FALSE = {"--no-overlap-p2p-communication"}
SEEN_BY_HAND = set()
# Megatron-LM names Megatron-Bridge's mlm_compat renames into TransformerConfig fields
# (megatron/bridge/training/mlm_compat/arguments.py, _transformer_config_from_args).
MLM_COMPAT_RENAMES = {"num_experts": "num_moe_experts", "swiglu": "gated_linear_unit",
                      "decoder_first_pipeline_num_layers": "num_layers_in_first_pipeline_stage",
                      "decoder_last_pipeline_num_layers": "num_layers_in_last_pipeline_stage"}


def literal(text):
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    if text in ("true", "false"):
        return text == "true"
    if text.startswith("[") or text.startswith('"'):
        return ast.literal_eval(text)
    return text


def build_transformer_config(values, what):
    """A real TransformerConfig from the model settings: its __post_init__ checks them.
    pipeline_dtype is what Megatron-LM derives from --bf16 (params_dtype; mlm_compat's
    kw_args["pipeline_dtype"] = args.params_dtype), and Megatron-Bridge's bf16 recipes set."""
    import torch
    cls = MLATransformerConfig if values.get("multi_latent_attention") else TransformerConfig
    known = fields(cls)
    kwargs = {k: v for k, v in values.items() if k in known}
    if kwargs.get("pipeline_model_parallel_size", 1) > 1:
        kwargs["pipeline_dtype"] = torch.bfloat16
    try:
        cls(**kwargs)
    except Exception as e:  # noqa: BLE001 - the framework's own complaint is the point
        check(False, f"{what}: megatron-core's {cls.__name__}({kwargs}) refused: {e}")


def check_megatron(text, what):
    args = bash_array(text, "MEGATRON_ARGS")
    values, i = {}, 0
    while i < len(args):
        flag = args[i]
        value = args[i + 1] if i + 1 < len(args) and not args[i + 1].startswith("--") else None
        i += 2 if value is not None else 1
        if flag in MEGATRON_FLAGS:
            dest = MEGATRON_FLAGS[flag]
        elif flag in BY_HAND:
            SEEN_BY_HAND.add(flag)
            dest = BY_HAND[flag]
        else:
            check(False, f"{what}: {flag} is no flag of megatron-core's or megatron-bridge's installed source")
            continue
        dest = MLM_COMPAT_RENAMES.get(dest, dest)
        if dest is None or dest in ("fp8", "bf16", "fp8_recipe"):
            continue  # not a TransformerConfig value, or one that needs Transformer Engine
        if dest == "add_bias_linear":
            values[dest] = False  # --disable-bias-linear
        elif dest == "moe_layer_freq":
            values[dest] = eval(value, {})  # Megatron's moe_freq_type evaluates it the same way
        else:
            values[dest] = (flag not in STORE_FALSE) if value is None else literal(value)
    build_transformer_config(values, what)
    return values


def bridge_override_parser():
    """Megatron-Bridge's own parse_hydra_overrides (training/utils/omegaconf_utils.py: Hydra's
    OverridesParser, applied to an OmegaConf config in struct mode, so an unknown key fails).
    The module is imported under a bare `megatron.bridge` package: the real package's
    __init__ loads the PEFT layers, which need Transformer Engine; this module needs only
    Hydra and OmegaConf."""
    import types
    package = types.ModuleType("megatron.bridge")
    package.__path__ = [BRIDGE]
    sys.modules.setdefault("megatron.bridge", package)
    from megatron.bridge.training.utils.omegaconf_utils import parse_hydra_overrides
    return parse_hydra_overrides


PARSE_HYDRA_OVERRIDES = bridge_override_parser()


def check_bridge(text, what):
    from omegaconf import OmegaConf
    overrides = bash_array(text, "BRIDGE_OVERRIDES")
    # The ConfigContainer as OmegaConf sees it: its members' dataclass fields, unset.
    config = OmegaConf.create({section: {name: None for name in sorted(names)}
                               for section, names in SECTIONS.items()} | {"mixed_precision": None})
    try:
        config = PARSE_HYDRA_OVERRIDES(config, overrides)
    except Exception as e:  # noqa: BLE001 - Megatron-Bridge's own complaint is the point
        check(False, f"{what}: Megatron-Bridge's parse_hydra_overrides refused: {e}")
        return
    recipe = config.mixed_precision
    check(recipe is None or recipe in MIXED_PRECISION,
          f"{what}: mixed_precision={recipe}: a registered recipe ({sorted(MIXED_PRECISION)})")
    model = {k: v for k, v in OmegaConf.to_container(config.model).items() if v is not None}
    build_transformer_config(model, what)


# ---- torchtitan ----------------------------------------------------------------------------

from torchtitan.config import ConfigManager
from torchtitan.distributed import ParallelDims


def llama3_modules():
    """The submodules torchtitan's Llama 3 Transformer.__init__ assigns (self.<name> = ..., and
    self.layers[str(layer_id)]), read from torchtitan/models/llama3/model/model.py with `ast`:
    importing the model needs tensorboard and torchdata, which a config check does not."""
    import torchtitan
    path = os.path.join(os.path.dirname(torchtitan.__file__), "models", "llama3", "model", "model.py")
    tree = ast.parse(open(path).read())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Transformer")
    init = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    names = set()
    for node in ast.walk(init):
        target = node.value if isinstance(node, ast.Subscript) else node
        if (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                and target.value.id == "self" and isinstance(target.ctx if not isinstance(node, ast.Subscript) else node.ctx, ast.Store)):
            names.add(target.attr)
    return names


LLAMA3_MODULES = llama3_modules()


def check_torchtitan(text, what, n_layers, world):
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
        f.write(text)
    config = ConfigManager().parse_args(["--job.config_file", f.name])
    os.unlink(f.name)
    p = config.parallelism
    ParallelDims(dp_replicate=p.data_parallel_replicate_degree, dp_shard=p.data_parallel_shard_degree,
                 cp=p.context_parallel_degree, tp=p.tensor_parallel_degree,
                 pp=p.pipeline_parallel_degree, ep=p.expert_parallel_degree,
                 etp=p.expert_tensor_parallel_degree, world_size=world)
    if p.module_fqns_per_model_part:
        named = [m for part in p.module_fqns_per_model_part for m in part]
        expected = {"tok_embeddings", "norm", "output"} | {f"layers.{i}" for i in range(n_layers)}
        check(LLAMA3_MODULES >= {"tok_embeddings", "layers", "norm", "output"},
              f"{what}: torchtitan's Llama 3 Transformer has the modules export names ({LLAMA3_MODULES})")
        check(set(named) == expected and len(named) == len(expected),
              f"{what}: the pipeline parts name the embedding, every layer, the norm and the output once")
    return config


# ---- DeepSpeed -----------------------------------------------------------------------------

from deepspeed.runtime.config import DeepSpeedConfig


class DataParallelMpu:
    """DeepSpeed's mpu interface (deepspeed/runtime/config.py reads the dp world size from it)."""

    def __init__(self, dp):
        self.dp = dp

    def get_data_parallel_world_size(self):
        return self.dp

    def get_data_parallel_rank(self):
        return 0

    def get_model_parallel_world_size(self):
        return 1

    def get_model_parallel_rank(self):
        return 0


def one_rank_comm():
    """DeepSpeedConfig asks deepspeed.comm for the rank before it asks the mpu for the dp world
    size, and takes a world of 1 when that fails (deepspeed/runtime/config.py). A stand-in
    rank 0 (instead of deepspeed.comm.init_distributed, which compiles a C++ op on a CPU)."""
    import deepspeed.comm
    deepspeed.comm.get_rank = lambda group=None: 0


def check_deepspeed(text, what, dp):
    config = DeepSpeedConfig(json.loads(text), mpu=DataParallelMpu(dp))
    check(config.world_size == dp, f"{what}: DeepSpeedConfig's dp world size is the plan's ({config.world_size})")
    return config


# ---- torchrun ------------------------------------------------------------------------------

from torch.distributed.run import get_args_parser


def check_torchrun(text, what):
    r = subprocess.run(["bash", "-n"], input=text, text=True, capture_output=True)
    check(r.returncode == 0, f"{what}: bash -n: {r.stderr}")
    line = next(l for l in text.splitlines() if l.startswith("#   torchrun "))
    words = shlex.split(line[len("#   torchrun "):].replace('"$MASTER_ADDR:29500"', "node0:29500"))
    args = get_args_parser().parse_args(words)
    return args


# ---- the cases -----------------------------------------------------------------------------

with tempfile.TemporaryDirectory() as folder:
    llama = plan_file(folder, "llama", "llama3-8b", "8xH100", "dp=2,tp=2,pp=2,zero=1,sp=1,recompute=selective")
    v = check_megatron(export(llama, "megatron"), "megatron llama3-8b tp2 pp2")
    check(v.get("tensor_model_parallel_size") == 2 and v.get("num_query_groups") == 8,
          "megatron: tp and query groups as the plan and model say")
    check_bridge(export(llama, "megatron-bridge"), "megatron-bridge llama3-8b tp2 pp2")

    # ZeRO-3 is Megatron-FSDP in the exported Megatron-Core; the plan was searched under a
    # profile that offers it (megatron-core's core_r0.8.0 has no FSDP).
    fp8 = plan_file(folder, "fp8", "llama3-8b", "8xH100", "dp=8,zero=3,recompute=full", precision="fp8",
                    framework="nemo")
    check_megatron(export(fp8, "megatron"), "megatron fp8 zero3")
    check_bridge(export(fp8, "megatron-bridge"), "megatron-bridge fp8 zero3")

    layout = plan_file(folder, "layout", "llama3.1-405b", "128xH100",
                       "dp=1,tp=8,pp=16,sp=1,schedule=interleaved,vpp=2,first_stage_layers=7,last_stage_layers=7",
                       global_batch=32)
    v = check_megatron(export(layout, "megatron"), "megatron 405b uneven interleaved")
    check(str(v.get("pipeline_model_parallel_layout", "")).count("t") == 126, "megatron: layout holds 126 layers")
    check_bridge(export(layout, "megatron-bridge"), "megatron-bridge 405b uneven interleaved")

    split = plan_file(folder, "split", "llama3.1-405b", "128xH100",
                      "dp=1,tp=8,pp=16,sp=1,first_stage_layers=7,last_stage_layers=7", global_batch=32)
    v = check_megatron(export(split, "megatron"), "megatron 405b uneven")
    check(v.get("num_layers_in_first_pipeline_stage") == 7, "megatron: the first stage's layers")
    check_bridge(export(split, "megatron-bridge"), "megatron-bridge 405b uneven")
    interleaved = plan_file(folder, "interleaved", "llama3-8b", "8xH100",
                            "dp=2,tp=2,pp=2,sp=1,schedule=interleaved,vpp=4,zero=1")
    v = check_megatron(export(interleaved, "megatron"), "megatron interleaved")
    check(v.get("virtual_pipeline_model_parallel_size") == 4, "megatron: 4 virtual stages per rank")
    check_bridge(export(interleaved, "megatron-bridge"), "megatron-bridge interleaved")
    check(v.get("overlap_p2p_comm") is False, "megatron: pp_overlap=0 turns the default overlap off")
    overlapped = plan_file(folder, "overlapped", "llama3-8b", "8xH100",
                           "dp=2,tp=2,pp=2,sp=1,schedule=interleaved,vpp=4,zero=1,pp_overlap=1")
    v = check_megatron(export(overlapped, "megatron"), "megatron interleaved pp_overlap")
    check("overlap_p2p_comm" not in v, "megatron: pp_overlap=1 is pretrain_gpt.py's default")
    check_bridge(export(overlapped, "megatron-bridge"), "megatron-bridge interleaved pp_overlap")

    moe = plan_file(folder, "moe", "mixtral-8x7b", "64xH100", "dp=16,tp=4,ep=8,zero=1,sp=1")
    check_megatron(export(moe, "megatron"), "megatron mixtral ep8")
    check_bridge(export(moe, "megatron-bridge"), "megatron-bridge mixtral ep8")

    llama3 = 32  # layers
    tt = plan_file(folder, "tt", "llama3-8b", "8xH100",
                   "dp=2,tp=2,pp=2,zero=2,sp=1,mbs=2,recompute=every:2,schedule=interleaved,vpp=2",
                   framework="torchtitan")  # with pp, torchtitan's FSDP2 keeps the gathered blocks: zero=2
    c = check_torchtitan(export(tt, "torchtitan"), "torchtitan interleaved", llama3, 8)
    check(c.parallelism.pipeline_parallel_schedule == "Interleaved1F1B"
          and c.activation_checkpoint.selective_ac_option == "2"
          and c.training.local_batch_size == 32 and c.parallelism.data_parallel_shard_degree == 2
          and c.parallelism.fsdp_reshard_after_forward == "never",
          "torchtitan: schedule, checkpointing, batch and sharding as the plan says")
    tt8 = plan_file(folder, "tt8", "llama3-8b", "8xH100",
                    "dp=8,zero=3,recompute=op,offload_opt=1,offload_params=1", precision="fp8",
                    framework="torchtitan")
    c = check_torchtitan(export(tt8, "torchtitan"), "torchtitan fsdp offload fp8", llama3, 8)
    check(c.training.enable_cpu_offload and "quantize.linear.float8" in c.model.converters,
          "torchtitan: offload and float8 as the plan says")

    # The torchtitan profile (9dec370ad) predates torchtitan's MoE models; 0.2.2, which the
    # export writes for, runs expert parallelism: the plan is one meshplan's executor runs.
    moe_tt = plan_file(folder, "moe_tt", "mixtral-8x7b", "8xH100", "dp=8,ep=8,zero=3,recompute=full",
                       framework="meshplan")
    c = check_torchtitan(export(moe_tt, "torchtitan"), "torchtitan mixtral ep8", 32, 8)
    check(c.parallelism.expert_parallel_degree == 8, "torchtitan: expert parallel degree 8")

    one_rank_comm()
    ds = plan_file(folder, "ds", "llama3-8b", "8xH100", "dp=8,zero=3,mbs=2,offload_opt=1,offload_params=1,recompute=full",
                   framework="deepspeed")
    c = check_deepspeed(export(ds, "deepspeed"), "deepspeed zero3 offload", 8)
    check(c.zero_optimization_stage == 3 and c.gradient_accumulation_steps == 4
          and c.train_micro_batch_size_per_gpu == 2 and c.bfloat16_config.enabled,
          "deepspeed: stage, accumulation, micro-batch and bf16 as the plan says")
    # Llama 3 8B's block: q and o 4096 x 4096, k and v 4096 x 1024, three 4096 x 14336 MLP
    # matrices and two norms, 218,112,000 parameters: one block gathered ahead (prefetch=1).
    check(c.zero_config.prefetch_bucket_size == 218112000
          and c.zero_config.max_live_parameters == 1000000000,
          "deepspeed: ZeRO-3 prefetches one block, with room for two")
    ds0 = plan_file(folder, "ds0", "llama3-8b", "8xH100", "dp=8,zero=3,prefetch=0", framework="deepspeed")
    c = check_deepspeed(export(ds0, "deepspeed"), "deepspeed zero3 no prefetch", 8)
    check(c.zero_config.prefetch_bucket_size == 0, "deepspeed: prefetch=0 turns ZeRO-3 prefetching off")
    ds2 = plan_file(folder, "ds2", "llama3-8b", "8xH100", "dp=8,zero=2", precision="bf16", framework="deepspeed")
    c = check_deepspeed(export(ds2, "deepspeed"), "deepspeed zero2 bf16", 8)
    check(c.bfloat16_config.bf16_master_weights_and_grads, "deepspeed: bf16 master weights for precision bf16")
    check(c.zero_config.contiguous_gradients and c.zero_config.reduce_bucket_size == 500000000,
          "deepspeed: the gradient bucket the deepspeed profile predicts (contiguous, 5e8 elements)")

    run = plan_file(folder, "run", "llama3-8b", "16xH100", "dp=4,tp=4,sp=1,zero=1", framework="meshplan")
    a = check_torchrun(export(run, "torchrun"), "torchrun 2 nodes")
    check(a.nnodes == "2" and a.nproc_per_node == "8" and a.no_python and a.training_script == "meshplan",
          "torchrun: 2 nodes of 8, meshplan run")

    # Refusals: exit 2, the knob named, nothing on stdout.
    # (Each plan is valid under the framework its file names: meshplan's executor runs zb_h1.)
    for target, plan, knob, runs_it in [("torchtitan", "dp=4,pp=2,zero=2,schedule=zb_h1", "schedule", "meshplan"),
                                        ("megatron", "dp=8,zero=3,recompute=op", "recompute", "torchtitan"),
                                        ("deepspeed", "dp=4,tp=2,sp=1", "tp", "meshplan")]:
        path = plan_file(folder, "refused", "llama3-8b", "8xH100", plan, framework=runs_it)
        r = subprocess.run([ARGS.meshplan, "export", path, "--to", target], capture_output=True, text=True)
        check(r.returncode == 2 and f"{knob}:" in r.stderr and target in r.stderr and r.stdout == "",
              f"{target} refuses {plan} naming {knob}: exit {r.returncode}, {r.stderr!r}")

print("megatron flags no installed package names, checked by hand (docs/export.md):",
      ", ".join(sorted(SEEN_BY_HAND)))
if FAILURES:
    print(f"{len(FAILURES)} check(s) failed")
    sys.exit(1)
print("every export was accepted by its framework's parser or schema")
