"""The command line, run as a real subprocess."""
from __future__ import annotations

import os

from support import imagegen
from support.cli_runs import WITHOUT_TENSORFLOW, run
from support.paths import REPO


def test_convert_csv(tmp_path):
    imagegen.write_files(tmp_path / "img", {"a.jpg": imagegen.odd_images()["rgb.jpg"][0]})
    (tmp_path / "t.csv").write_text("split,image_uri,label\nTRAIN,img/a.jpg,cat\nTRAIN,img/zzz.jpg,cat\n")
    # validate="header" needs no TensorFlow; the default mode decodes with it (see test_convert_csv_default_mode).
    done = run("convert", "--source", str(tmp_path / "t.csv"), "--output_dir", str(tmp_path / "out"), "--job_label", "cli",
               "--validate", "header", entry=("-c", WITHOUT_TENSORFLOW))
    assert done.returncode == 0, done.stderr  # 99: the conversion imported TensorFlow
    assert done.stderr == ""
    assert done.stdout.splitlines()[0] == "ConversionResult(DirectRunner)"
    assert "TRAIN=1" in done.stdout and "discarded: 1" in done.stdout
    jobs = os.listdir(tmp_path / "out")
    assert len(jobs) == 1 and jobs[0].startswith("cli-")


def test_convert_csv_default_mode_is_quiet_too(tmp_path):
    """The default validate="decode" imports TensorFlow, without its start-up lines on stderr."""
    imagegen.write_files(tmp_path / "img", {"a.jpg": imagegen.odd_images()["rgb.jpg"][0]})
    (tmp_path / "t.csv").write_text("split,image_uri,label\nTRAIN,img/a.jpg,cat\n")
    done = run("convert", "--source", str(tmp_path / "t.csv"), "--output_dir", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert "validate='decode'" in done.stdout


def test_convert_csv_in_another_encoding_and_a_refused_one(tmp_path):
    (tmp_path / "t.csv").write_bytes("split,prénom\nTRAIN,Zoë\nTRAIN,caf\x81\n".encode("latin-1"))
    done = run("convert", "--source", str(tmp_path / "t.csv"), "--output_dir", str(tmp_path / "out"),
               "--encoding", "cp1252", "--no_progress", entry=("-c", WITHOUT_TENSORFLOW))
    assert done.returncode == 0, done.stderr
    assert "TRAIN=1" in done.stdout and "discarded: 1" in done.stdout
    job = os.path.join(tmp_path / "out", os.listdir(tmp_path / "out")[0])
    with open(os.path.join(job, "discarded.csv"), encoding="utf-8") as stream:
        assert stream.read().splitlines()[1] == ("TRAIN,caf\\x81,invalid text: line 3: byte(s) 0x81 in column "
                                                 "'prénom' are not valid cp1252")
    done = run("convert", "--source", str(tmp_path / "t.csv"), "--output_dir", str(tmp_path / "out2"),
               "--encoding", "klingon")
    assert done.returncode == 2 and "encoding 'klingon' is not a text encoding" in done.stderr


def test_fatal_input_error_is_one_line_and_non_zero(tmp_path):
    done = run("convert", "--source", str(tmp_path / "nope.csv"), "--output_dir", str(tmp_path / "out"))
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "does not exist" in done.stderr


def test_help_lists_examples():
    done = run("convert", "--help")
    assert done.returncode == 0 and "--output_dir" in done.stdout and "examples:" in done.stdout


def test_schema_file_parsing_and_errors(tmp_path):
    import pytest

    from tfrecorder.cli import read_schema_file

    (tmp_path / "s.yml").write_text("id: IntegerInput\ntags: 'StringInput[]'\n")
    assert read_schema_file(str(tmp_path / "s.yml")) == {"id": "IntegerInput", "tags": "StringInput[]"}
    for name, text, message in [("a.json", "{not json", "not valid JSON"), ("b.yaml", "a: [", "not valid YAML"),
                                ("c.json", '["IntegerInput"]', "must map column names"),
                                ("d.json", '{"a": 3}', "must map column names")]:
        (tmp_path / name).write_text(text)
        with pytest.raises(ValueError, match=message):
            read_schema_file(str(tmp_path / name))
    with pytest.raises(ValueError, match="cannot read schema file"):
        read_schema_file(str(tmp_path / "absent.json"))


def test_readme_exit_codes_match_the_cli():
    import re

    from tfrecorder import cli

    readme = (REPO / "README.md").read_text()
    paragraph = " ".join(readme.split("Exit codes: ", 1)[1].split("\n\n", 1)[0].split())
    for code, meaning in [(cli.EXIT_OK, "success"), (cli.EXIT_FAILURE, "unexpected failure"),
                          (cli.EXIT_INPUT_ERROR, "bad input"), (cli.EXIT_VERIFY_FAILED, "`verify` found a mismatch"),
                          (cli.EXIT_OUTPUT_ERROR, "output could not be written")]:
        assert re.search(rf"\b{code} (an? |the )?{re.escape(meaning)}", paragraph), (code, meaning)
    docs = [readme, *(path.read_text() for path in (REPO / "docs").glob("*.md"))]
    disk_lines = [line for doc in docs for line in doc.splitlines() if "disk" in line and "exit" in line]
    assert disk_lines and all(re.findall(r"exit (\d)", line) == [str(cli.EXIT_OUTPUT_ERROR)] for line in disk_lines)


def test_convert_on_the_portable_runner_with_beam_options(tmp_path):
    """--beam_option (--dataflow_option's new name) sets the portable runner's options; the job service
    is Beam's embedded one, its worker a process of its own started with this interpreter."""
    from support.portable import SUBPROCESS_WORKERS

    (tmp_path / "t.csv").write_text("split,n\nTRAIN,1\nTRAIN,2\nTEST,3\n")
    flags = [argument for name, value in SUBPROCESS_WORKERS.items() for argument in ("--beam_option", f"{name}={value}")]
    done = run("convert", "--source", str(tmp_path / "t.csv"), "--output_dir", str(tmp_path / "out"),
               "--runner", "PortableRunner", *flags)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "ConversionResult(PortableRunner)" and "TRAIN=2" in done.stdout
    dask = run("convert", "--source", str(tmp_path / "t.csv"), "--output_dir", str(tmp_path / "out"),
               "--runner", "DaskRunner")
    assert dask.returncode == 2 and "finish_bundle" in dask.stderr
    flink = ("convert", "--source", str(tmp_path / "t.csv"), "--output_dir", str(tmp_path / "out"),
             "--runner", "FlinkRunner", "--beam_option", "environment_type=EXTERNAL",
             "--beam_option", "environment_config=localhost:50000", "--beam_option", "flink_job_server_jar=no/such.jar")
    remote = run(*flink)
    assert remote.returncode == 2 and "output_dir must be gs://" in remote.stderr
    shared = run(*flink, "--shared_filesystem")  # local paths allowed: the next check speaks
    assert shared.returncode == 2 and "no file no/such.jar" in shared.stderr


def test_status_and_clean_of_incomplete_jobs(tmp_path):
    from tfrecorder.format import resume_files

    temp_dir = tmp_path / "out" / ".incomplete-x-20260101-000000"
    temp_dir.mkdir(parents=True)
    resume_files.write_fingerprint(str(temp_dir), {"created": 0, "rows_estimate": 10, "parts_total": 2})
    done = run("status", str(tmp_path / "out"), entry=("-c", WITHOUT_TENSORFLOW))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("x-20260101-000000: parts 0 / 2, rows 0 / ~10, age ") and "resumable" in done.stdout
    done = run("clean", str(tmp_path / "out"), "--older-than", "bad", entry=("-c", WITHOUT_TENSORFLOW))
    assert done.returncode == 2 and "expected an age such as" in done.stderr
    done = run("clean", str(tmp_path / "out"), "--older-than", "1d", entry=("-c", WITHOUT_TENSORFLOW))
    assert done.returncode == 0 and done.stdout.endswith("1 incomplete job(s) removed\n")
    assert os.listdir(tmp_path / "out") == []


def test_convert_no_resume_starts_a_new_job_beside_an_incomplete_one(tmp_path):
    (tmp_path / "t.csv").write_text("split,n\nTRAIN,1\nTRAIN,2\n")
    done = run("convert", "--source", str(tmp_path / "t.csv"), "--output_dir", str(tmp_path / "out"), "--resume",
               entry=("-c", WITHOUT_TENSORFLOW))
    assert done.returncode == 2 and "resume=True: no incomplete job" in done.stderr
    done = run("convert", "--source", str(tmp_path / "t.csv"), "--output_dir", str(tmp_path / "out"), "--no-resume",
               "--no_progress", entry=("-c", WITHOUT_TENSORFLOW))
    assert done.returncode == 0, done.stderr


def test_convert_coco_with_image_root(tmp_path):
    from support.datasets import scenes, write_coco

    path = write_coco(tmp_path / "coco", scenes(2), name="photos")
    loose = tmp_path / "instances.json"  # not beside its images: --image_root says where they are
    loose.write_bytes(path.read_bytes())
    done = run("convert", "--source", str(loose), "--output_dir", str(tmp_path / "out"), "--validate", "header",
               "--image_root", str(tmp_path / "coco" / "photos"), "--split", "test",
               entry=("-c", WITHOUT_TENSORFLOW))
    assert done.returncode == 0, done.stderr
    assert "rows in: 5" in done.stdout and "discarded: 0" in done.stdout and "TEST" in done.stdout
    bad = run("convert", "--source", str(loose), "--output_dir", str(tmp_path / "out2"), "--split", "dev")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "split must be one of" in bad.stderr


def test_report_writes_html_and_duplicates_fail_is_one_line(tmp_path):
    image = imagegen.odd_images()["rgb.jpg"][0]
    imagegen.write_files(tmp_path / "img", {"a.jpg": image, "b.jpg": image})
    (tmp_path / "t.csv").write_text("split,image_uri,label\nTRAIN,img/a.jpg,cat\nTEST,img/b.jpg,cat\n")
    failed = run("convert", "--source", str(tmp_path / "t.csv"), "--output_dir", str(tmp_path / "out"),
                 "--validate", "header", "--duplicates", "fail", entry=("-c", WITHOUT_TENSORFLOW))
    assert failed.returncode == 2 and failed.stderr.count("\n") == 1, failed.stderr
    assert "train/test leakage" in failed.stderr and "img/a.jpg (TRAIN) = " in failed.stderr and "img/b.jpg (TEST)" in failed.stderr
    dropped = run("convert", "--source", str(tmp_path / "t.csv"), "--output_dir", str(tmp_path / "dropped"),
                  "--validate", "header", "--duplicates", "drop", entry=("-c", WITHOUT_TENSORFLOW))
    assert dropped.returncode == 0 and "discarded: 1" in dropped.stdout and "leakage" not in dropped.stdout, dropped.stderr
    done = run("convert", "--source", str(tmp_path / "t.csv"), "--output_dir", str(tmp_path / "out"),
               "--validate", "header", entry=("-c", WITHOUT_TENSORFLOW))
    assert done.returncode == 0 and "WARNING train/test leakage: 1 duplicate group" in done.stdout, done.stderr
    [job] = [name for name in os.listdir(tmp_path / "out") if not name.startswith(".")]
    shown = run("report", str(tmp_path / "out" / job), "--html", str(tmp_path / "r.html"))
    assert shown.returncode == 0, shown.stderr
    assert "duplicates: 1 groups (2 rows)" in shown.stdout and "WARNING train/test leakage" in shown.stdout
    assert (tmp_path / "r.html").read_text().count("data:image/png;base64,") == 2
