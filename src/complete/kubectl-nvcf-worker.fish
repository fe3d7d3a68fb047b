# fish completion for kubectl-nvcf-worker and kubectl-nvcf_worker. Each TAB asks
# the binary itself (`__complete WORDS...`, the protocol kubectl's own completion
# speaks); its `value<TAB>description` lines are fish's own format.
function __kubectl_nvcf_worker_complete
    set -l words (commandline -opc)
    set -l cur (commandline -ct)
    set -l out ($words[1] __complete $words[2..-1] "$cur" 2>/dev/null)
    or return
    test (count $out) -gt 0; or return
    set -l directive (string replace -r '^:' '' -- $out[-1])
    set -e out[-1]
    for line in $out
        test -n "$line"; and printf '%s\n' $line
    end
    # Directive 4 (no file completion) unset and no candidate: files.
    if test (count $out) -eq 0; and test (math "bitand($directive, 4)") -eq 0
        __fish_complete_path "$cur"
    end
end
complete -c kubectl-nvcf-worker -f -a '(__kubectl_nvcf_worker_complete)'
complete -c kubectl-nvcf_worker -f -a '(__kubectl_nvcf_worker_complete)'
