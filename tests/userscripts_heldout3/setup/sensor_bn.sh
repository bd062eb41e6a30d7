#!/usr/bin/env bash
# Export of the wrist-IMU recording used by sensor_bn.py (50 Hz, 6 channels + activity label).
# The logger dropped out for ~7 s during the session; those rows have empty sensor fields.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python}"
mkdir -p data
"$PYTHON" - <<'PY'
import numpy as np
rng = np.random.default_rng(7)
T, hz = 12000, 50
t = np.arange(T) / hz
# activity segments of 6-14 s each
labels = np.zeros(T, dtype=int)
pos, act = 0, 0
while pos < T:
    seg = int(rng.integers(6 * hz, 14 * hz))
    labels[pos:pos + seg] = act
    act = (act + int(rng.integers(1, 4))) % 4
    pos += seg
freq = np.array([0.5, 1.2, 2.0, 3.1])[labels]
amp = np.array([0.2, 0.8, 1.5, 2.2])[labels]
sig = np.stack([
    amp * np.sin(2 * np.pi * freq * t + k) + 0.15 * rng.standard_normal(T) for k in range(6)
], axis=1)
sig[:, 2] += 9.81
with open("data/imu_session.csv", "w") as f:
    f.write("timestamp,acc_x,acc_y,acc_z,gyro_x,gyro_y,gyro_z,activity\n")
    for i in range(T):
        if 1640 <= i < 2000:  # logger dropout
            vals = [""] * 6
        else:
            vals = [f"{v:.5f}" for v in sig[i]]
        f.write(f"{t[i]:.2f}," + ",".join(vals) + f",{labels[i]}\n")
print("wrote data/imu_session.csv", T, "rows")
PY
