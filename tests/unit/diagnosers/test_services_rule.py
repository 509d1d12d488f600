"""The services rule: how fatal an MLflow failure is, and which connection errors are the Ray dashboard's."""

from pathlib import Path

from diagnosers.engine import diagnose_path
from diagnosers.findings import DASHBOARD_UNREACHABLE, MLFLOW_UNREACHABLE, Severity

SUBMIT = 'RAY_ADDRESS="http://10.0.0.4:8265" ray job submit --working-dir ./ -- python train.py'
REFUSED = [
    "Traceback (most recent call last):",
    '  File "/opt/conda/lib/python3.10/site-packages/urllib3/connection.py", line 198, in _new_conn',
    "    sock = connection.create_connection(",
    "ConnectionRefusedError: [Errno 111] Connection refused",
]


def findings(tmp_path: Path, *lines: str) -> dict:
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "job.log").write_text("\n".join(lines) + "\n")
    return {found.id: found for found in diagnose_path(tmp_path).findings}


def test_a_retry_warning_naming_a_timeout_is_not_fatal(tmp_path):
    found = findings(
        tmp_path,
        "WARNING:urllib3.connectionpool:Retrying (Retry(total=4, connect=5, read=4, redirect=5, status=5)) after "
        "connection broken by 'ReadTimeoutError(\"HTTPSConnectionPool(host='mlflow.example.com', port=443): Read "
        "timed out. (read timeout=120)\")': /api/2.0/mlflow/runs/log-metric",
        "[Epoch 11] loss: 257.423",
    )
    assert found[MLFLOW_UNREACHABLE].severity == Severity.WARNING


def test_a_raised_mlflow_exception_line_is_fatal(tmp_path):
    found = findings(
        tmp_path,
        "mlflow.exceptions.MlflowException: API request to http://mlflow:5000/api/2.0/mlflow/runs/create failed "
        "with exception HTTPConnectionPool(host='mlflow', port=5000): Max retries exceeded with url: "
        "/api/2.0/mlflow/runs/create (Caused by ResponseError('too many 500 error responses'))",
    )
    assert found[MLFLOW_UNREACHABLE].severity == Severity.CRITICAL


def test_a_connection_error_while_submitting_is_the_dashboard(tmp_path):
    found = findings(tmp_path, SUBMIT, *REFUSED)
    assert found[DASHBOARD_UNREACHABLE].severity == Severity.CRITICAL
    assert any("ConnectionRefusedError" in quote.text for quote in found[DASHBOARD_UNREACHABLE].evidence)


def test_a_connection_error_after_the_job_was_submitted_is_not_the_dashboard(tmp_path):
    found = findings(tmp_path, SUBMIT, "Job 'raysubmit_x1' submitted successfully", *REFUSED)
    assert DASHBOARD_UNREACHABLE not in found


def test_the_dashboard_process_traceback_is_the_dashboard_dying(tmp_path):
    found = findings(
        tmp_path,
        "Traceback (most recent call last):",
        '  File "/opt/conda/lib/python3.10/site-packages/ray/dashboard/dashboard.py", line 30, in <module>',
        "    import grpc",
        "ModuleNotFoundError: No module named 'grpc'",
    )
    assert DASHBOARD_UNREACHABLE in found


def test_a_wrapped_mlflow_error_quotes_its_429_cause_and_says_rate_limiting(tmp_path):
    found = findings(
        tmp_path,
        "MlflowException: API request to ",
        "https://dbc.cloud.databricks.com/api/2.0/mlflow/runs/search failed with ",
        "exception HTTPSConnectionPool(host='dbc.cloud.databricks.com', port=443):",
        "Max retries exceeded with url: /api/2.0/mlflow/runs/search (Caused by ",
        "ResponseError('too many 429 error responses'))",
    )
    mlflow = found[MLFLOW_UNREACHABLE]
    assert any(quote.line == 5 for quote in mlflow.evidence)
    assert "rate limiting" in mlflow.detail and mlflow.severity == Severity.CRITICAL


def test_an_http_cause_far_from_any_mlflow_line_is_not_mlflow(tmp_path):
    found = findings(
        tmp_path,
        "WARNING mlflow.tracking: Max retries exceeded with url: /api/2.0/mlflow/runs/log-metric",
        *["step 1 loss=2.3"] * 6,
        "urllib3.exceptions.MaxRetryError: (Caused by ResponseError('too many 429 error responses'))",
    )
    assert [quote.line for quote in found[MLFLOW_UNREACHABLE].evidence] == [1]
    assert "rate limiting" not in found[MLFLOW_UNREACHABLE].detail


CHAINED_TO_THE_CLIENT = [
    "",
    "The above exception was the direct cause of the following exception:",
    "",
    "Traceback (most recent call last):",
    '  File "/opt/conda/lib/python3.10/site-packages/ray/dashboard/modules/job/cli.py", line 273, in submit',
    "    job_id = client.submit_job(",
    '  File "/opt/conda/lib/python3.10/site-packages/ray/dashboard/modules/job/sdk.py", line 246, in submit_job',
]


def test_a_refused_connection_chained_to_a_cut_submission_client_traceback_is_the_dashboard(tmp_path):
    found = findings(tmp_path, *REFUSED, *CHAINED_TO_THE_CLIENT)
    assert found[DASHBOARD_UNREACHABLE].severity == Severity.CRITICAL
    assert found[DASHBOARD_UNREACHABLE].evidence[0].text == REFUSED[-1]


def test_a_refused_connection_after_an_echoed_ray_job_submit_is_the_dashboard(tmp_path):
    found = findings(tmp_path, "+ ray job submit --no-wait -- python3 -m verl.trainer.main_ppo", *REFUSED)
    assert found[DASHBOARD_UNREACHABLE].severity == Severity.CRITICAL


def test_a_traceback_cut_in_urllib3s_connect_below_ray_job_submit_is_the_dashboard(tmp_path):
    found = findings(tmp_path, SUBMIT, *REFUSED[:2])
    dashboard = found[DASHBOARD_UNREACHABLE]
    assert dashboard.severity == Severity.CRITICAL
    assert [quote.line for quote in dashboard.evidence] == [1, 3]


def test_a_cut_connect_traceback_after_the_job_was_submitted_is_not_the_dashboard(tmp_path):
    found = findings(tmp_path, SUBMIT, "Job 'raysubmit_x1' submitted successfully", *REFUSED[:2])
    assert DASHBOARD_UNREACHABLE not in found


def test_the_dashboard_agent_process_traceback_is_the_dashboard_dying(tmp_path):
    found = findings(
        tmp_path,
        "Traceback (most recent call last):",
        '  File "/usr/local/lib/python3.6/dist-packages/ray/new_dashboard/agent.py", line 298, in <module>',
        "    loop.run_until_complete(agent.run())",
        "grpc.experimental.aio._call.AioRpcError: <AioRpcError of RPC that terminated with:",
    )
    assert DASHBOARD_UNREACHABLE in found


NO_CREDENTIALS = "botocore.exceptions.NoCredentialsError: Unable to locate credentials"


def test_missing_s3_credentials_after_an_mlflow_run_link_is_the_artifact_store(tmp_path):
    found = findings(
        tmp_path,
        "🏃 View run calm-owl-12 at: http://mlflow.mlflow.svc:5000/#/experiments/1/runs/0a1b2c3d4e5f",
        NO_CREDENTIALS,
    )
    assert found[MLFLOW_UNREACHABLE].severity == Severity.CRITICAL


def test_missing_s3_credentials_with_no_sign_of_mlflow_is_not_mlflow(tmp_path):
    found = findings(tmp_path, "Loading shards from s3://datasets/train/", NO_CREDENTIALS)
    assert MLFLOW_UNREACHABLE not in found
