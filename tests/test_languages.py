"""Language-aware evidence (issue 37): a message in a language the library
is not written in.  Its function words ("para", "un", "la", "die") are
not the library's words: where they stray into it they must not count as
coverage or as a rare term.  The replays run the real Claude Code hook on
a skill tree in tmp_path, at the defaults (the calibrated decision)."""

import json

import pytest

from retriever import build, languages, query, store
from skillret_helpers import make_skill
# The Claude Code hook at the defaults, on this module's ``skills`` tree.
from test_session import hook, names_in  # noqa: F401

# English skills; three of them hold words that are Spanish, Portuguese or
# French function words in English clothes ("de-duplicate", "para-
# virtualised", "LA", "UN"), as real libraries do.
SKILLS = [
    ("pdf-extract", "Extract text and tables from PDF files, including scanned PDF invoices via OCR."),
    ("csv-dedupe", "De-duplicate rows of CSV files and spreadsheets: de-dupe by key, keep the newest."),
    ("kvm-virtio", "Tune para-virtualised virtio drivers of a KVM guest for disk and network speed."),
    ("la-transit", "Plan trips on LA Metro: bus and rail routes, fares and the TAP card."),
    ("un-datasets", "Find UN statistics datasets (un data, SDG indicators) and cite them."),
    ("k8s-certs", "Rotate Kubernetes TLS certificates and kubeconfig credentials of a cluster."),
    ("git-bisect", "Find the commit that introduced a regression with git bisect."),
    ("release-notes", "Generate release notes from the commits since the last tag, grouped by change type."),
    ("uno-platform", "Build cross-platform .NET apps with the Uno Platform from one codebase."),
]


@pytest.fixture
def skills(tmp_path):
    root = tmp_path / "skills"
    for name, desc in SKILLS:
        make_skill(root, name, {"name": name, "description": desc})
    return root


def test_a_spanish_request_over_english_skills_gets_the_right_one(hook):
    got = hook("necesito extraer el texto de un PDF escaneado para la contabilidad de la empresa")
    assert got == ["pdf-extract"]


def test_spanish_function_words_are_no_evidence(hook):
    # Nothing in it but the library's stray words: on its own it asks for
    # no skill of this library.
    assert hook("necesito una proyección financiera a 3 años para un inversionista ángel") is None


def test_spanish_determiners_are_function_words_too(hook):
    # "uno" (one), "ninguna" (none): a follow-up about an email sequence
    # was given the Uno Platform's skills.
    assert hook("¿y uno para los que el día 5 todavía no han creado ninguna factura?") is None


def _index(tmp_path, skills):
    path = str(tmp_path / "idx.skr")
    scope = build.resolve([str(skills)])
    build.build(scope, path)
    return store.load(path)


@pytest.mark.parametrize("text, lang", [
    ("necesito una proyección financiera para un inversionista", "es"),
    ("¿y uno para los que todavía no han creado ninguna factura?", "es"),
    ("preciso de uma planilha com os custos do projeto para a equipe", "pt"),
    ("ich möchte die Tabelle in Postgres partitionieren, wie mache ich das", "de"),
    ("je voudrais un audit SEO de mon site avec les balises", "fr"),
    ("PDF에서 표를 추출해 주세요", "cjk"),
    ("kill the processes that die on the LA server", ""),
    ("de-duplicate the rows of this csv", ""),
])
def test_a_message_in_another_language_is_told_and_its_function_words_dropped(tmp_path, skills, text, lang):
    idx = _index(tmp_path, skills)
    assert idx["header"]["lang"]["library"] == ["en"]
    q = query.parse(idx, text)
    assert q["lang"] == lang
    if lang and lang != "cjk":
        assert not set(q["terms"]) & {"para", "de", "la", "un", "die", "les", "os", "com", "uno", "ninguna"}
    if not lang:
        assert q["terms"] == query.query_terms(dict(idx, header=dict(idx["header"], lang=None)), text)


def test_an_english_request_over_a_spanish_library_is_foreign(tmp_path):
    root = tmp_path / "es"
    for name, desc in [
        ("extraer-pdf", "Extrae el texto y las tablas de los archivos PDF, también de los escaneados."),
        ("notas-version", "Genera las notas de la versión a partir de los commits desde la última etiqueta."),
        ("certificados-k8s", "Renueva los certificados TLS de un clúster de Kubernetes y sus credenciales."),
    ]:
        make_skill(root, name, {"name": name, "description": desc})
    idx = _index(tmp_path, root)
    assert idx["header"]["lang"]["library"] == ["es"]
    assert query.parse(idx, "extract the tables from this scanned PDF for me")["lang"] == "en"
    assert query.parse(idx, "extrae las tablas de este PDF escaneado")["lang"] == ""


def test_the_library_language_is_what_most_skills_are_written_in():
    texts = ["Extract text and tables from the PDF files of a folder"] * 9 + \
            ["Extrae el texto de los archivos PDF de una carpeta"]
    assert languages.library(texts) == ["en", "es"]
    assert languages.library(texts[:9] + texts[:9]) == ["en"]
    assert languages.library(["PDF 文件的文字和表格提取"] * 5 + texts[:5]) == ["cjk", "en"]
    assert languages.library(["xyz"]) == ["en"]


# ------------------------------------------------------------------ copies

# Two collections, each with its own take on one skill (names and words
# differ, as helm-chart-scaffolding and helm-chart-builder do), plus
# neighbours that are not copies.
COLLECTIONS = {
    "coll-a": [
        ("helm-chart-scaffolding", "Design, organize and scaffold Helm charts for Kubernetes applications: "
                                   "templates, values files, chart dependencies and packaging."),
        ("k8s-network-policy", "Write Kubernetes NetworkPolicy manifests to restrict pod traffic."),
        ("terraform-modules", "Build reusable Terraform modules for AWS, Azure and GCP."),
    ],
    "coll-b": [
        ("helm-chart-builder", "Scaffold Helm charts for Kubernetes: chart templates, values, "
                               "dependencies, linting and packaging for a release."),
        ("docker-slim", "Shrink Docker images with multi-stage builds and smaller base images."),
        ("argocd-apps", "Deploy Kubernetes applications with Argo CD: app of apps, sync waves."),
    ],
}


@pytest.fixture
def two_collections(tmp_path):
    roots = []
    for coll, skills in COLLECTIONS.items():
        root = tmp_path / coll
        for name, desc in skills:
            make_skill(root, name, {"name": name, "description": desc},
                       body="# %s\n\nSteps, checks and examples for %s.\n" % (name, name))
        roots.append(root)
    return roots


def test_copies_are_found_at_build_time_across_collections(tmp_path, two_collections):
    path = str(tmp_path / "idx.skr")
    build.build(build.resolve([str(r) for r in two_collections]), path)
    idx = store.load(path)
    groups = [[store.doc(idx, n)[1] for n in g] for g in idx["header"]["copies"]]
    # The longer description first.
    assert groups == [["helm-chart-scaffolding", "helm-chart-builder"]]


PROMPTS = ["scaffold a helm chart for our kubernetes app with templates and values files",
           "create a new helm chart with dependencies and package it",
           "I need a helm chart for this service, with values per environment"]


@pytest.mark.parametrize("prompt", PROMPTS)
def test_two_rival_copies_never_fill_two_slots(cli, tmp_path, two_collections, prompt):
    args = ["hook", "claude-code"]
    for r in two_collections:
        args += ["--root", r]
    p = {"session_id": "s-copies", "transcript_path": str(tmp_path / "none.jsonl"), "cwd": str(tmp_path),
         "hook_event_name": "UserPromptSubmit", "prompt": prompt}
    # The ranking keeps both copies: the decision gives the group one slot.
    ranked = cli("--format", "json", *args[2:], prompt, env={"SKILL_RETRIEVAL_DECIDE": "off"})
    names = [r["name"] for r in json.loads(ranked.stdout)["results"]]
    assert {"helm-chart-scaffolding", "helm-chart-builder"} <= set(names[:3])
    proc = cli(*args, input=json.dumps(p), env={"SKILL_RETRIEVAL_DECIDE": None})
    assert (proc.returncode, proc.stderr) == (0, ""), proc
    got = names_in(proc.stdout) or []
    assert len(set(got) & {"helm-chart-scaffolding", "helm-chart-builder"}) == 1, got


def test_explain_shows_the_group_and_which_copy_takes_the_slot(cli, two_collections):
    args = []
    for r in two_collections:
        args += ["--root", r]
    proc = cli("explain", *args, PROMPTS[0], env={"SKILL_RETRIEVAL_DECIDE": None})
    assert proc.returncode == 0, proc.stderr
    assert "copies (one slot a turn; docs/decision.md): helm-chart-scaffolding, helm-chart-builder" in proc.stdout
    assert "not injected: a copy of helm-chart-" in proc.stdout


def test_the_fusion_gives_a_message_in_another_language_bm25s_foreign_share():
    from retriever.semantic import fuse
    # The borrowed terms BM25 matches do not make it the library's language.
    assert fuse.alpha_for("rotar los certificados TLS del cluster", 0.9, "es") == fuse.ALPHA_FOREIGN
    assert fuse.alpha_for("rotate the TLS certificates of the cluster", 0.9) > fuse.ALPHA_FOREIGN
