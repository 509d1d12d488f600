"""MLflow client errors: the tracking server refused, timed out, or answered 5xx.

MLflow's REST client says `API request to <url> failed with exception ...` when it cannot
connect and `API request to endpoint <path> failed with error code 503 != 200` when the server
answers with an error. A 4xx such as RESOURCE_DOES_NOT_EXIST is a request problem, not an
unreachable server, and is left out on purpose; 429 is not: the server refuses the client's requests (rate
limiting, as Databricks does) and the run's logging fails as it would against a server that is down.

A terminal or a paster may wrap MLflow's one-line message, leaving urllib3's cause (`ResponseError('too many 429
error responses')`) on a line of its own without the word mlflow: HTTP_ERROR_CAUSE reads that line, and the
services rule counts it only right after an MLflow line of the same file. A message translated into the user's
language keeps urllib3's `HTTPConnectionPool(host=...)` and `ResponseError(`, which are read instead of the words.
"""

from __future__ import annotations

from diagnosers.parsers.signals import pattern

SERVER_UNREACHABLE = "mlflow.unreachable"
HTTP_ERROR_CAUSE = "mlflow.http-error-cause"
ARTIFACT_CREDENTIALS = "mlflow.artifact-credentials"
RUN_LINK = "mlflow.run-link"

_REFUSING_STATUS = r"(?:429|5\d\d)"

PATTERNS = (
    pattern(
        SERVER_UNREACHABLE,
        ["API request to", "mlflow", "MLflow", "MLFLOW"],
        # MLflow servers of 2019-2020 answered 500 for a missing run; the body's error code says it was the request.
        r"^(?!.*\b(?:RESOURCE_DOES_NOT_EXIST|RESOURCE_ALREADY_EXISTS|INVALID_PARAMETER_VALUE|INVALID_STATE"
        r"|PERMISSION_DENIED|UNAUTHENTICATED|BAD_REQUEST)\b)"
        # urllib3 names the host before the /api/2.0/mlflow/ path, MLflow's own messages the other way round.
        r"(?=.*(?:mlflow|MLflow|MLFLOW)).*?"
        rf"(?P<what>API request to (?:endpoint )?(?P<url>\S*mlflow\S*) failed with (?:exception|(?:error )?code "
        rf"{_REFUSING_STATUS}).*"
        r"|(?:Max retries exceeded|Connection refused|Failed to establish a new connection|Name or service not known"
        rf"|Read timed out|Temporary failure in name resolution|TEMPORARILY_UNAVAILABLE|error code {_REFUSING_STATUS}"
        rf"|too many {_REFUSING_STATUS} error responses|to the tracking server has failed|RestException: INTERNAL_ERROR"
        # A translated message keeps urllib3's names: the pool that gave up, the retry's cause.
        r"|HTTPS?ConnectionPool\(host=|ResponseError\().*)",
        [
            "mlflow.exceptions.MlflowException: API request to http://mlflow:5000/api/2.0/mlflow/runs/create "
            "failed with exception HTTPConnectionPool(host='mlflow', port=5000): Max retries exceeded with url: "
            "/api/2.0/mlflow/runs/create (Caused by NewConnectionError('Failed to establish a new connection: "
            "[Errno 111] Connection refused'))",
            "mlflow.exceptions.MlflowException: API request to endpoint /api/2.0/mlflow/runs/log-batch failed "
            "with error code 503 != 200. Response body: 'upstream connect error'",
            # MLflow 0.9 (/preview/ paths, no "error" before the code)
            "2019/06/19 10:12:53 ERROR mlflow.utils.rest_utils: API request to https://mlflow.example.com/api/2.0/"
            "preview/mlflow/runs/log-parameter failed with code 500 != 200, retrying up to 1 more times.",
            "mlflow.exceptions.RestException: INTERNAL_ERROR: Response: {'error_code': 'INTERNAL_ERROR'}",
            "2025/04/23 21:10:54 WARNING mlflow.models.model: Logging model metadata to the tracking server has "
            "failed. The model artifacts have been logged successfully under s3://bucket/1/artifacts.",
            "WARNING:urllib3.connectionpool:Retrying (Retry(total=4, connect=5, read=4, redirect=5, status=5)) after "
            "connection broken by 'ReadTimeoutError(\"HTTPSConnectionPool(host='mlflow.example.com', port=443): Read "
            "timed out. (read timeout=120)\")': /api/2.0/mlflow/runs/log-metric",
            "mlflow.exceptions.MlflowException : la demande d'API à http://0.0.0.0:5000/api/2.0/mlflow/runs/create a "
            "échoué avec l'exception HTTPConnectionPool(host='0.0.0.0', port=5000) : nombre maximal de tentatives "
            "dépassé avec URL : /api/2.0/mlflow/runs/create (causé par ResponseError('trop de 500 réponses d'erreur'))",
        ],
    ),
    pattern(
        HTTP_ERROR_CAUSE,
        ["error responses"],
        rf"too many (?P<status>{_REFUSING_STATUS}) error responses",
        ["ResponseError('too many 429 error responses'))"],
    ),
    pattern(
        SERVER_UNREACHABLE,
        ["WORKER TIMEOUT", ".server: Exception on", "OperationalError)"],
        # The server failing in its own words, on a line that names MLflow (its logger, a container or shipper's
        # prefix, the client's exception): gunicorn killing a worker stuck on a request, Flask's handler error, the
        # backend store's database error wrapped in the client's exception.
        r"(?=.*(?:mlflow|MLflow|MLFLOW)).*?(?P<what>\[CRITICAL\] WORKER TIMEOUT \(pid:\d+\)"
        r"|mlflow\.server: Exception on (?P<url>\S+).*|MlflowException: \((?:\w+\.)*OperationalError\).*)",
        [
            "[mlflow] [2023-02-25 20:37:00] [2023-02-25 20:37:00 +0000] [18] [CRITICAL] WORKER TIMEOUT (pid:361)",
            "mlflow_server  | [2024-05-20 18:47:23 +0900] [22] [CRITICAL] WORKER TIMEOUT (pid:87)",
            "2019/10/22 08:05:53 ERROR mlflow.server: Exception on /ajax-api/2.0/preview/mlflow/artifacts/list [GET]",
            "mlflow.exceptions.MlflowException: (pymysql.err.OperationalError) (1213, 'Deadlock found when trying to "
            "get lock; try restarting transaction')",
        ],
    ),
    pattern(
        ARTIFACT_CREDENTIALS,
        ["CredentialsError: "],
        # boto3 has no credentials for the s3:// artifact location the run was given; the services rule counts it
        # only where the same log shows MLflow at work, since a job reading its data from S3 raises it too.
        r"(?:No|Partial)CredentialsError: .*",
        ["botocore.exceptions.NoCredentialsError: Unable to locate credentials"],
    ),
    pattern(
        RUN_LINK,
        ["View run ", "View experiment at"],
        # MLflow 2.10+ prints the run's and the experiment's UI links when a run ends.
        r"View (?:run \S+|experiment) at: (?P<url>https?://\S+)",
        ["View run ambitious-stork-407 at: http://mlflow:5000/#/experiments/1/runs/f2bf15ac4ef744e0"],
    ),
)
