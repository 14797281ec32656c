from apps_marketplace.loaders import dataset_rows, marketplace_catalogue_load, model_rows
from apps_marketplace.models import App, AppParameter, DatasetEntry, ModelEntry


def test_it_ships_hundreds_of_models_and_datasets(catalogue):
    assert catalogue.models == ModelEntry.objects.count() >= 200
    assert catalogue.datasets == DatasetEntry.objects.count() >= 100
    assert catalogue.apps == App.objects.count() == 10


def test_running_it_twice_changes_nothing(catalogue):
    before = (
        ModelEntry.objects.count(),
        DatasetEntry.objects.count(),
        App.objects.count(),
        AppParameter.objects.count(),
        App.served_models.through.objects.count(),
    )
    marketplace_catalogue_load()
    after = (
        ModelEntry.objects.count(),
        DatasetEntry.objects.count(),
        App.objects.count(),
        AppParameter.objects.count(),
        App.served_models.through.objects.count(),
    )
    assert before == after


def test_it_refreshes_shipped_rows_and_keeps_staff_additions(catalogue):
    llama = ModelEntry.objects.get(repo_id="meta-llama/Meta-Llama-3-8B-Instruct")
    ModelEntry.objects.filter(pk=llama.pk).update(parameter_count=1, is_active=False)
    staff_added = ModelEntry.objects.create(
        repo_id="acme/house-model",
        name="house-model",
        organisation="acme",
        task="text-generation",
        size_bytes=10,
        licence="other",
        mount_path="/models/acme/house-model",
    )
    marketplace_catalogue_load()
    llama.refresh_from_db()
    assert llama.parameter_count == 8_030_000_000
    assert llama.is_active is False  # staff unlisted it: the loader does not relist it
    assert ModelEntry.objects.filter(pk=staff_added.pk).exists()


def test_entries_are_accurate_where_published(catalogue):
    llama8 = ModelEntry.objects.get(repo_id="meta-llama/Meta-Llama-3-8B-Instruct")
    assert (llama8.num_layers, llama8.num_kv_heads, llama8.head_dim, llama8.licence) == (32, 8, 128, "llama3")
    assert llama8.mount_path == "/models/meta-llama/Meta-Llama-3-8B-Instruct"
    assert llama8.source_url == "https://huggingface.co/meta-llama/Meta-Llama-3-8B-Instruct"
    whisper = ModelEntry.objects.get(repo_id="openai/whisper-large-v3")
    assert whisper.licence == "apache-2.0" and whisper.parameter_count == 1_540_000_000
    gsm8k = DatasetEntry.objects.get(repo_id="openai/gsm8k")
    assert gsm8k.num_rows == 8792 and gsm8k.mount_path == "/datasets/openai/gsm8k"
    assert gsm8k.source_url == "https://huggingface.co/datasets/openai/gsm8k"


def test_every_shipped_row_is_well_formed():
    models, datasets = model_rows(), dataset_rows()
    assert len({row["repo_id"] for row in models}) == len(models)
    assert len({row["repo_id"] for row in datasets}) == len(datasets)
    task_values = {value for value, _label in ModelEntry._meta.get_field("task").choices}
    for row in models:
        assert row["task"] in task_values, row["repo_id"]
        assert row["parameter_count"] > 0 and row["size_bytes"] > 0, row["repo_id"]
        arch = [row[key] for key in ("num_layers", "num_kv_heads", "head_dim")]
        assert all(arch) or not any(arch), row["repo_id"]
        if row["num_attention_heads"] and row["num_kv_heads"]:
            assert row["num_attention_heads"] % row["num_kv_heads"] == 0, row["repo_id"]
    dataset_tasks = {value for value, _label in DatasetEntry._meta.get_field("task").choices}
    assert all(row["task"] in dataset_tasks for row in datasets)


def test_every_app_serves_its_default_model_and_names_a_real_gpu(catalogue):
    from instances.models import GpuModel

    gpus = set(GpuModel.objects.values_list("slug", flat=True))
    for app in App.objects.all():
        if app.gpu_required:
            assert app.default_model in app.served_models.all(), app.slug
            assert app.recommended_gpu_slug in gpus, app.slug


def test_every_shipped_recommendation_fits_at_the_apps_defaults(catalogue):
    from apps_marketplace.forms import FitForm
    from apps_marketplace.selectors import app_fit_table

    for app in App.objects.filter(gpu_required=True):
        for model in app.served_models.all():
            form = FitForm({**FitForm.initial_for(app), "model": model.repo_id}, app=app)
            assert form.is_valid(), (app.slug, model.repo_id, form.errors)
            table = app_fit_table(app=app, model=model, workload=form.workload())
            assert table.recommended is not None and table.recommended.fits, (app.slug, model.repo_id)
