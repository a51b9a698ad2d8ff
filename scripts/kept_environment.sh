# Sourced by the set-up scripts: `keep_environment VENV WHAT...` makes VENV (e.g. .venv) a link
# to an environment kept outside the checkout, in $DCPMI_ENV_CACHE (default
# ~/.cache/lm-eval-dcpmi/envs), named after VENV and a digest of WHAT it is made from (files
# and words: requirement files, a release). A clean checkout, CI's included, so reuses the
# environments an earlier one made (minutes saved: vLLM's alone is ~3 GB), and a changed
# requirement makes a new one (the superseded one of that name is removed). The set-up's pip
# run then points the editable install at the current checkout: an environment serves one
# checkout at a time, the last to run scripts/setup.sh (its `dcpmi` and `lm_eval` commands
# import that checkout's plugin), so run it again after working in another checkout.
# VENV left alone: a real folder (made by hand, or with DCPMI_ENV_CACHE=none), or any path
# outside the checkout ($DCPMI_VENV pointing elsewhere).
keep_environment() {
  local venv=$1
  shift
  if [ "${DCPMI_ENV_CACHE:-}" = none ] || [ -e "$venv" -a ! -L "$venv" ] || [[ $venv == */* ]]; then
    return 0
  fi
  local cache=${DCPMI_ENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lm-eval-dcpmi/envs}
  local digest
  digest=$(
    {
      python3 --version
      for what in "$@"; do
        if [ -f "$what" ]; then
          echo "== $what"
          # pyproject.toml: only what it installs (its dependencies and extras), so that a
          # version or a test marker changed keeps the environment.
          if [[ $what == *pyproject.toml ]]; then
            sed -n '/^dependencies = \[/,/^\[project.scripts\]/p' "$what"
          else
            cat "$what"
          fi
        else
          echo "== word $what"
        fi
      done
    } | sha256sum | cut -c1-12
  )
  local name=${venv#.}
  local kept=$cache/$name-$digest
  mkdir -p "$cache"
  if [ ! -d "$kept" ]; then
    for superseded in "$cache/$name"-????????????; do
      if [ -d "$superseded" ]; then
        echo "setup: removing $superseded (its requirements changed)"
        rm -rf "$superseded"
      fi
    done
  fi
  ln -sfn "$kept" "$venv"
}
