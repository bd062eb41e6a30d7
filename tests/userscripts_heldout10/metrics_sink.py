"""Tiny metrics sidecar: reads JSON lines on stdin, appends them to a file and
acks every record on stdout (the trainer can read acks if it wants to)."""
import json
import sys


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else "metrics.jsonl"
    with open(out_path, "a") as out:
        for line in sys.stdin:
            line = line.strip()
            if not line:
                continue
            rec = json.loads(line)
            out.write(json.dumps(rec) + "\n")
            # echo back so the caller can check what was stored
            sys.stdout.write("ack " + json.dumps(rec) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
