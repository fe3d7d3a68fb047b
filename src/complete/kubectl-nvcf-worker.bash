# bash completion for kubectl-nvcf-worker and kubectl-nvcf_worker.
# Each TAB asks the binary itself (`kubectl-nvcf-worker __complete WORDS...`, the
# protocol kubectl's own completion speaks), so subcommands, flags, their values,
# kubeconfig contexts and the cluster's namespaces come from one place.
_kubectl_nvcf_worker() {
    local IFS=$' \t\n' line words=() cur prefix out directive c
    # The words typed up to the cursor; the last is the one being completed.
    line="${COMP_LINE:0:COMP_POINT}"
    read -r -a words <<< "$line"
    if [[ ${#words[@]} -eq 0 || "$line" == *[[:space:]] ]]; then
        words+=("")
    fi
    cur="${words[${#words[@]}-1]}"
    out="$("${COMP_WORDS[0]}" __complete "${words[@]:1}" 2>/dev/null)" || return 0
    directive="${out##*:}"
    out="${out%:*}"
    # bash splits the word being completed at COMP_WORDBREAKS (= and :): reply
    # with what follows the split, so `--context=pr` completes to `--context=prod`.
    prefix="${cur%"${COMP_WORDS[COMP_CWORD]}"}"
    COMPREPLY=()
    while IFS= read -r c; do
        [[ -n "$c" ]] || continue
        c="${c%%$'\t'*}"
        COMPREPLY+=("${c#"$prefix"}")
    done <<< "$out"
    # Directive 4 (no file completion): no files when there is no candidate.
    if [[ ${#COMPREPLY[@]} -eq 0 ]] && (( directive & 4 )); then
        compopt +o default 2>/dev/null
    fi
    return 0
}
complete -o default -F _kubectl_nvcf_worker kubectl-nvcf-worker kubectl-nvcf_worker
