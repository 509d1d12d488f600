"""Training-loop timing lines that show how long each step waited for data.

The loops people run print the data wait beside the step time: the PyTorch ImageNet example and
its many copies (`Time  2.103 ( 2.301)  Data  1.912 ( 2.004)`: this batch, then the epoch's running
mean), timm (`Time: 0.512s, ... Data: 0.401 (0.398)`), mmcv, mmengine and detectron2 (`time: 1.234,
data_time: 0.987`: means over the logging window), torchvision's references and the DETR/DeiT/MAE
family (`time: 1.2345  data: 0.9876`), Dassl and the CoOp family (`time 0.869 (0.869)  data 0.758
(0.758)`), YOLOX (`iter_time: 1.599s, data_time: 0.003s`), LeRobot (`updt_s:0.302 data_s:13.330`: the
update and the wait, apart), and Lightning's SimpleProfiler table, whose dataloader row is set against
the training epoch's. Evaluation lines are left out: no backward pass, so their share says nothing
about training. Rules turn the signals into step phases (rules.measures).
"""

from __future__ import annotations

from diagnosers.parsers.signals import pattern

# One line of a training loop: data_s and step_s (or compute_s, the step without the wait) in seconds, with the
# running means where printed.
STEP_TIMING = "step.timing"
# One row of Lightning's SimpleProfiler report: an action and its total seconds.
PROFILER_ROW = "step.profiler-row"

# Lightning's actions: the dataloader's (2.x, 1.6-1.9, <1.6) and the training epoch they are set against.
DATALOADER_ACTIONS = ("train_dataloader_next", "get_train_batch")
EPOCH_ACTION = "run_training_epoch"

_NUMBER = r"\d+(?:\.\d+)?"
# mmengine's `Epoch(val)`, detectron2's and torchvision's `Test:` headers, timm's `Test:`.
_NOT_EVALUATION = r"^(?!.*(?:\((?:val|test)\)|\bTest:|\bEval(?:uation)?:|\bValidation:|\bValid:))"

PATTERNS = (
    pattern(
        STEP_TIMING,
        ["Data "],
        _NOT_EVALUATION + rf"(?:.*\[\s*(?P<index>\d+)\s*/\s*\d+\])?.*?\bTime\s+(?P<step_s>{_NUMBER})\s+"
        rf"\(\s*(?P<step_avg>{_NUMBER})\)\s+Data\s+(?P<data_s>{_NUMBER})\s+\(\s*(?P<data_avg>{_NUMBER})\)",
        [
            "Epoch: [0][ 10/5005]\tTime  2.103 ( 2.301)\tData  1.912 ( 2.004)\tLoss 6.9e+00 (6.9e+00)\tAcc@1   0.00 ("
            "  0.11)\tAcc@5   0.00 (  0.53)",
            "Epoch: [0][10/5005]\tTime 22.424 (7.498)\tData 22.372 (7.070)\tLoss 6.9065 (6.9074)\tPrec@1 0.000 (0.142)",
        ],
    ),
    pattern(
        STEP_TIMING,
        ["Data: "],
        _NOT_EVALUATION + rf"(?:.*\[\s*(?P<index>\d+)\s*/\s*\d+\s*\()?.*?\bTime: (?P<step_s>{_NUMBER})s,\s+"
        rf"{_NUMBER}/s\s+\(\s*(?P<step_avg>{_NUMBER})s,\s+{_NUMBER}/s\).*?\bData: (?P<data_s>{_NUMBER})\s+"
        rf"\((?P<data_avg>{_NUMBER})\)",
        [
            "Train: 0 [  50/1251 (  4%)]  Loss: 6.912 (6.92)  Time: 0.512s,  500.00/s  (0.530s,  483.02/s)  LR: "
            "1.000e-05  Data: 0.401 (0.398)",
        ],
    ),
    pattern(
        STEP_TIMING,
        ["data_time: "],
        _NOT_EVALUATION + rf"(?:.*\[\s*(?P<index>\d+)\s*/\s*\d+\])?"
        rf".*?(?:\b|iter_)time: (?P<step_s>{_NUMBER})s?,?\s+(?:last_time: {_NUMBER}\s+)?"
        rf"data_time: (?P<data_s>{_NUMBER})",
        [
            "2020-05-08 18:33:04,627 - mmdet - INFO - Epoch [1][50/7517]\tlr: 0.00125, eta: 4:57:01, time: 0.594, "
            "data_time: 0.033, memory: 6836, loss_rpn_cls: 0.3086, loss: 1.0614",
            "05/12 10:00:00 - mmengine - INFO - Epoch(train)  [1][  50/7330]  lr: 2.0000e-03  eta: 1 day, 2:00:00  "
            "time: 1.2340  data_time: 0.9870  memory: 3456  loss: 1.8",
            "[11/20 10:00:00 d2.utils.events]:  eta: 1 day, 1:00:00  iter: 19  total_loss: 2.046  time: 0.5123  "
            "last_time: 0.4991  data_time: 0.4011  last_data_time: 0.3870  lr: 0.000400  max_mem: 2604M",
            "2023-05-25 09:08:45.291 | INFO     | yolox.core.trainer:after_iter:282 - epoch: 1/20, iter: 190/1051, gpu "
            "mem: 20839Mb, mem: 46.8Gb, iter_time: 1.599s, data_time: 0.003s, total_loss: 4.2, lr: 1.634e-04",
        ],
    ),
    pattern(
        STEP_TIMING,
        [")\tdata ", ") data ", ")  data "],
        _NOT_EVALUATION + rf"(?:.*\[\s*(?P<index>\d+)\s*/\s*\d+\])?.*?\btime (?P<step_s>{_NUMBER}) "
        rf"\((?P<step_avg>{_NUMBER})\)\s+data (?P<data_s>{_NUMBER}) \((?P<data_avg>{_NUMBER})\)",
        [
            "epoch [2/100][1/1]\ttime 0.869 (0.869)\tdata 0.758 (0.758)\teta 0:01:25\tloss 2.7656 (2.7656)\tacc "
            "50.0000 (50.0000)\tlr 1.999013e-03",
        ],
    ),
    pattern(
        STEP_TIMING,
        ["data_s:"],
        rf"(?:.*?\bstep:(?P<index>\d+)\b)?.*?\bupdt_s:(?P<compute_s>{_NUMBER}) data_s:(?P<data_s>{_NUMBER})",
        [
            "INFO 2025-07-11 08:20:13 ts/train.py:232 step:9 smpl:576 ep:2 epch:0.00 loss:1.051 grdn:4.482 lr:1.8e-06 "
            "updt_s:0.302 data_s:13.330",
        ],
    ),
    pattern(
        STEP_TIMING,
        ["  data: "],
        _NOT_EVALUATION + rf"(?:.*\[\s*(?P<index>\d+)\s*/\s*\d+\])?"
        rf".*?\btime: (?P<step_s>{_NUMBER})(?:\s+\({_NUMBER}\))?\s+data: (?P<data_s>{_NUMBER})",
        [
            "Epoch: [0]  [  10/5004]  eta: 1 day, 10:44:23  lr: 0.100000  img/s: 402.1  loss: 6.9078 (6.9078)  "
            "time: 0.6364  data: 0.4011  max mem: 8340",
            "INFO: eta: 11:25:34  iter: 1420  loss: 1.3347 (1.4339)  time: 0.5229 (0.4644)  data: 0.0149 (0.0179)  "
            "cpu2cuda: 0.1155 (0.1139)  forward: 0.2449 (0.2222)  lr: 0.020000  max mem: 3273",
        ],
    ),
    pattern(
        PROFILER_ROW,
        [*DATALOADER_ACTIONS, EPOCH_ACTION],
        rf"(?P<action>\[_?TrainingEpochLoop\]\.train_dataloader_next|\bget_train_batch|\brun_training_epoch)\s*\|"
        rf"\s*(?P<mean_s>{_NUMBER}(?:e-?\d+)?)\s*\|\s*(?P<calls>\d+)\s*\|\s*(?P<total_s>{_NUMBER}(?:e-?\d+)?)\s*\|",
        [
            "|  [_TrainingEpochLoop].train_dataloader_next                   |  0.013642       |  3910           |  "
            "53.34          |  46.68          |",
            "get_train_batch                    \t|  0.0030616      \t|469            \t|  1.4359         \t|  3.019  ",
            "run_training_epoch                 \t|  44.305         \t|1              \t|  44.305         \t|  93.15  ",
        ],
    ),
)
